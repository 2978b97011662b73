"""Check the icon files with Pillow (format, size, likeness to the logo scaled down), then render the page and
score its icon links (served, decodable by the browser), one component each."""

from pathlib import Path

import numpy as np
from PIL import Image

import webcheck

SITE = Path("/app")
LIKENESS = 20.0  # at most this mean absolute difference (0-255, per channel) from the logo scaled down
LINKS = """[...document.querySelectorAll('head link')].map(l => ({rel: [...l.relList], path: new URL(l.href).pathname,
  sizes: l.getAttribute('sizes'), href: l.href}))"""
LOADS = """async hrefs => Promise.all(hrefs.map(async h => {
  const status = await fetch(h, {cache: 'no-store'}).then(r => r.status, () => 0);
  const img = new Image(); img.src = h;
  const width = await img.decode().then(() => img.naturalWidth, () => 0);
  return {status, width}; }))"""


def flat(im: Image.Image) -> np.ndarray:
    """The image on white, as RGB floats."""
    rgba = im.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"), dtype=float)


def like_logo(im: Image.Image, size: int) -> bool:
    logo = Image.open(SITE / "logo.png").convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
    return im.size == (size, size) and float(np.abs(flat(im) - flat(logo)).mean()) <= LIKENESS


def png_icon(name: str, size: int) -> bool:
    try:
        with Image.open(SITE / name) as im:
            return im.format == "PNG" and like_logo(im, size)
    except Exception:
        return False


def ico() -> bool:
    try:
        with Image.open(SITE / "favicon.ico") as im:
            return im.format == "ICO" and {(16, 16), (32, 32)} <= set(im.info.get("sizes", ())) and all(
                like_logo(im.ico.getimage((s, s)), s) for s in (16, 32))
    except Exception:
        return False


def check(c: webcheck.Checks) -> None:
    c.score("png_16", png_icon("favicon-16.png", 16))
    c.score("png_32", png_icon("favicon-32.png", 32))
    c.score("apple_touch", png_icon("apple-touch-icon.png", 180))
    c.score("ico", ico())
    page = c.open("index.html", width=1000, height=700)
    c.screenshot(page)
    links = page.evaluate(LINKS)
    wanted = {"icon16": ("icon", "/favicon-16.png", "16x16"), "icon32": ("icon", "/favicon-32.png", "32x32"),
              "ico": ("icon", "/favicon.ico", None), "apple": ("apple-touch-icon", "/apple-touch-icon.png", "180x180")}
    found = {key: next((link for link in links if rel in link["rel"] and link["path"] == path
                        and (sizes is None or link["sizes"] == sizes)), None)
             for key, (rel, path, sizes) in wanted.items()}
    hrefs = [link["href"] for link in found.values() if link is not None]
    loads = dict(zip(hrefs, page.evaluate(LOADS, hrefs), strict=True))

    def served(*keys: str) -> bool:
        return all(found[k] is not None and loads[found[k]["href"]]["status"] == 200 for k in keys)

    c.score("icon_links", served("icon16", "icon32", "ico"))
    c.score("apple_link", served("apple"))
    c.score("icons_decode", len(hrefs) == len(wanted) and all(v["width"] > 0 for v in loads.values()) and not c.errors)


webcheck.run(["png_16", "png_32", "apple_touch", "ico", "icon_links", "apple_link", "icons_decode"], check)
