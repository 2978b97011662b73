"""Compute each listed element's text colour against the background behind it, read the notice's contrast off a
screenshot, and score each requirement of the instruction, one reward component each (the starting page,
unchanged, scores 0 on all of them)."""

import webcheck

GREEN, WHITE, YELLOW, DARK = (0x2E, 0x7D, 0x32), (255, 255, 255), (0xFF, 0xF3, 0xCD), (0x33, 0x33, 0x33)
GROUPS = {"header_contrast": {"title": GREEN, "tagline": GREEN}, "text_contrast": {"intro": WHITE, "fine-print": WHITE},
          "link_contrast": {"link-ferns": WHITE, "link-cacti": WHITE}, "notice_contrast": {"notice-text": YELLOW},
          "footer_contrast": {"footer-text": DARK}}
TEXT = ("Spring sale Fresh plants for every room All indoor plants are 20% off until Sunday. Free delivery on orders "
        "over $50 Ferns Cacti Offer ends Sunday at midnight. Green Corner, 12 Leaf Street")  # as shipped
COLOURS = """ids => Object.fromEntries(ids.map(id => { const e = document.getElementById(id); if (!e) return [id, null];
  let bg = null, opacity = 1;
  for (let n = e; n; n = n.parentElement) { const s = getComputedStyle(n); opacity *= parseFloat(s.opacity);
    if (!bg && s.backgroundColor !== 'rgba(0, 0, 0, 0)' && s.backgroundColor !== 'transparent') bg = s.backgroundColor; }
  const s = getComputedStyle(e), r = e.getBoundingClientRect();
  return [id, {color: s.color, bg: bg || 'rgb(255, 255, 255)', opacity,
               shown: r.width > 0 && r.height > 0 && s.visibility === 'visible'}]; }))"""
WORDS = "() => document.body.innerText.split(/\\s+/).filter(Boolean).join(' ')"


def readable(e: dict | None, background: tuple[int, int, int]) -> bool:
    return (e is not None and e["shown"] and e["opacity"] == 1 and e["color"].startswith("rgb(")
            and e["bg"].startswith("rgb(") and webcheck.rgb(e["bg"]) == background
            and webcheck.contrast(webcheck.rgb(e["color"]), background) >= 4.5)


def notice_pixels(image, box: dict) -> bool:
    """Inside the notice's box: its commonest pixel is still the pale yellow, and the pixel that contrasts most
    with it (the text's stems) reaches 4.5:1."""
    x0, y0 = max(0, int(box["x"]) + 2), max(0, int(box["y"]) + 2)
    x1, y1 = min(image.width, int(box["x"] + box["w"]) - 2), min(image.height, int(box["y"] + box["h"]) - 2)
    if x1 - x0 < 20 or y1 - y0 < 10:
        return False
    colours = image.crop((x0, y0, x1, y1)).getcolors(1 << 24)  # (count, pixel) pairs
    ground = max(colours)[1]
    return webcheck.near(ground, YELLOW, 3) and max(webcheck.contrast(p, ground) for _, p in colours) >= 4.5


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    same = page.evaluate(WORDS) == TEXT
    colours = page.evaluate(COLOURS, [i for group in GROUPS.values() for i in group])
    image = c.screenshot(page)
    notice = webcheck.boxes(page, "#notice")
    for name, group in GROUPS.items():
        ok = same and all(readable(colours[i], bg) for i, bg in group.items())
        if name == "notice_contrast":
            ok = ok and len(notice) == 1 and notice_pixels(image, notice[0])
        c.score(name, ok)


webcheck.run(list(GROUPS), check)
