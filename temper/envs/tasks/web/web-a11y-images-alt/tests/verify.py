"""Read the page's images, alt texts, language and headings as a screen reader would meet them, and score each
requirement of the instruction, one reward component each (the starting page, unchanged, scores 0 on all)."""

import webcheck

IMAGES = [("logo.svg", 64, 64), ("divider.svg", 600, 12), ("wheat.svg", 24, 24), ("loaf.svg", 300, 200),
          ("wheat.svg", 24, 24), ("hours.svg", 300, 120), ("phone.svg", 16, 16)]
ALT = {"logo.svg": "Northwind Bakery", "loaf.svg": "A round sourdough loaf on a wooden board",
       "hours.svg": "Open Tuesday to Sunday, closed on Monday"}
DECORATIVE = {"divider.svg", "wheat.svg", "phone.svg"}
TEXT = ("Fresh from the oven Our bread Every loaf is shaped by hand and baked in a stone oven before sunrise. "
        "Opening hours Call us: 555-0100")  # the page's visible words, as shipped
SEEN = """() => [...document.images].map(i => { const r = i.getBoundingClientRect();
  return {file: (i.getAttribute('src') || '').split('/').pop(), alt: i.getAttribute('alt'), w: r.width, h: r.height,
          loaded: i.complete && i.naturalWidth > 0}; })"""
WORDS = "() => document.body.innerText.split(/\\s+/).filter(Boolean).join(' ')"


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=900)
    seen = page.evaluate(SEEN)
    kept = (len(seen) == len(IMAGES) and all(i["loaded"] for i in seen)
            and all(i["file"] == f and abs(i["w"] - w) <= 0.5 and abs(i["h"] - h) <= 0.5
                    for i, (f, w, h) in zip(seen, IMAGES, strict=False)))
    c.score("informative_alt", kept and all(i["alt"] is not None and i["alt"].strip() == ALT[i["file"]]
                                            for i in seen if i["file"] in ALT))
    c.score("decorative_alt", kept and all(i["alt"] == "" for i in seen if i["file"] in DECORATIVE))
    same = page.evaluate(WORDS) == TEXT
    c.score("lang", same and page.evaluate("document.documentElement.getAttribute('lang')") == "en")
    texts = lambda sel: [t.strip() for t in page.locator(sel).all_inner_texts()]  # noqa: E731
    c.score("headings", same and texts("h1") == ["Fresh from the oven"] and texts("h2") == ["Our bread", "Opening hours"])
    c.screenshot(page)


webcheck.run(["informative_alt", "decorative_alt", "lang", "headings"], check)
