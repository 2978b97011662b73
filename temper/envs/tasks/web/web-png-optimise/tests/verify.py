"""Check each icon with Pillow (still a PNG, the same pixels as shipped, at most 25% of its shipped bytes), then
render the page and score its icons' width and height attributes, one component each."""

import hashlib
from pathlib import Path

import numpy as np
from PIL import Image

import webcheck

SITE = Path("/app")
SHARE = 0.25
# name -> (side in pixels, bytes as shipped, sha256 of its RGBA pixels with fully transparent ones zeroed)
ICONS = {"home": (128, 65754, "105bc4f7eb5656844d77cfba615e59bdec990e22cf86cb929fedbe6e2a92b44a"),
         "search": (96, 37033, "49768345fe332a8fc7923a740c11b7eb797c11166d04870c5fcfaae3ef1f4b18"),
         "star": (128, 65754, "3075b038140ce3cd52ca0aa75d80c7e22e03855968d6ca83bb82a19bca7a84d5"),
         "gear": (64, 16516, "7928a451b26c991b5a81de4114c58ef67245f6fff92e7b10e5cf197e150188b0")}
IMGS = """() => [...document.querySelectorAll('img')].map(i => ({path: new URL(i.src).pathname, done: i.complete,
  natural: i.naturalWidth, width: i.getAttribute('width'), height: i.getAttribute('height')}))"""


def optimised(name: str) -> bool:
    side, shipped, digest = ICONS[name]
    path = SITE / "icons" / f"{name}.png"
    try:
        with Image.open(path) as im:
            if im.format != "PNG" or im.size != (side, side) or path.stat().st_size > SHARE * shipped:
                return False
            px = np.asarray(im.convert("RGBA")).copy()
    except Exception:
        return False
    px[px[..., 3] == 0] = 0
    return hashlib.sha256(px.tobytes()).hexdigest() == digest


def check(c: webcheck.Checks) -> None:
    for name in ICONS:
        c.score(f"{name}_optimised", optimised(name))
    page = c.open("index.html", width=1000, height=400)
    c.wait_for(page, "[...document.images].every(i => i.complete)")
    c.screenshot(page)
    imgs = page.evaluate(IMGS)
    c.score("page_dimensions", all(any(i["path"] == f"/icons/{name}.png" and i["done"] and i["natural"] == side
                                       and i["width"] == str(side) and i["height"] == str(side) for i in imgs)
                                   for name, (side, _, _) in ICONS.items()) and not c.errors)


webcheck.run([f"{name}_optimised" for name in ICONS] + ["page_dimensions"], check)
