"""Check the three scaled photos with Pillow (format, exact width, kept aspect, byte budget, likeness to the
photo), then render the page at two window widths and score which file the hero image loaded, one component
each."""

from pathlib import Path

import numpy as np
from PIL import Image

import webcheck

SITE = Path("/app")
WIDTHS = {400: 40_000, 800: 100_000, 1600: 300_000}  # width -> the most bytes its file may have
LIKENESS = 8.0  # at most this mean absolute difference (0-255, per channel) at 120 x 80 from the photo
HERO = """() => { const i = document.getElementById('hero');
  return i ? {src: i.currentSrc ? new URL(i.currentSrc).pathname : '', done: i.complete, width: i.naturalWidth} : null; }"""


def opened(w: int) -> Image.Image | None:
    try:
        im = Image.open(SITE / f"photo-{w}.jpg")
        im.load()
        return im
    except Exception:
        return None


def sized(w: int) -> bool:
    im = opened(w)
    return im is not None and im.format == "JPEG" and im.width == w and abs(im.height - w * 2 / 3) <= 1.5


def alike(w: int) -> bool:
    im = opened(w)
    if im is None:
        return False
    small = (120, 80)
    ref = np.asarray(Image.open(SITE / "photo.jpg").convert("RGB").resize(small, Image.Resampling.BOX), dtype=float)
    got = np.asarray(im.convert("RGB").resize(small, Image.Resampling.BOX), dtype=float)
    return float(np.abs(got - ref).mean()) <= LIKENESS


def hero(c: webcheck.Checks, width: int, shot: bool = False) -> dict | None:
    page = c.open("index.html", width=width, height=800)
    c.wait_for(page, "document.getElementById('hero')?.complete === true")
    if shot:
        c.screenshot(page)
    return page.evaluate(HERO)


def loaded(seen: dict | None, files: tuple[int, ...]) -> bool:
    return seen is not None and seen["done"] and any(
        seen["src"] == f"/photo-{w}.jpg" and seen["width"] == w and sized(w) for w in files)


def check(c: webcheck.Checks) -> None:
    c.score("sizes", all(sized(w) for w in WIDTHS))
    c.score("budgets", all(sized(w) and (SITE / f"photo-{w}.jpg").stat().st_size <= most for w, most in WIDTHS.items()))
    c.score("same_picture", all(alike(w) for w in WIDTHS))
    c.score("narrow_loads_small", loaded(hero(c, 400, shot=True), (400, 800)))
    c.score("wide_loads_1600", loaded(hero(c, 1600), (1600,)))


webcheck.run(["sizes", "budgets", "same_picture", "narrow_loads_small", "wide_loads_1600"], check)
