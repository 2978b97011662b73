"""Render the page at two window sizes, then with its content made long, and score each requirement of the
instruction, one reward component each."""

import webcheck

PARTS = """Object.fromEntries(['header', 'nav', 'main', 'aside', 'footer'].map(s => {
  const all = document.querySelectorAll(s); if (all.length !== 1) return [s, null];
  const r = all[0].getBoundingClientRect();
  return [s, {x: r.left, y: r.top + scrollY, w: r.width, h: r.height, text: all[0].innerText.trim()}]; }))"""
WINDOW = "({w: innerWidth, h: innerHeight, scroll: document.documentElement.scrollHeight})"
LONGER = """() => { const m = document.querySelector('main'); if (!m) return; for (let i = 0; i < 60; i++) {
  const p = document.createElement('p'); p.textContent = 'One more note, to make the page long.'; m.append(p); } }"""


def bottom(b: dict) -> float:
    return b["y"] + b["h"]


def landmarks(page) -> bool:
    texts = lambda sel: [t.strip() for t in page.locator(sel).all_inner_texts()]  # noqa: E731
    return (texts("header h1") == ["Field notes"] and texts("header nav a") == ["Home", "Archive", "About"]
            and texts("main h2") == ["Latest entry"] and page.locator("main p").count() >= 1
            and texts("aside h2") == ["Tags"] and texts("footer") == ["Field notes, 2024"])


def sticky(parts: dict, window: dict) -> bool:
    f, m, a = parts["footer"], parts["main"], parts["aside"]
    return (None not in (f, m, a) and abs(bottom(f) - window["h"]) <= 1 and window["scroll"] <= window["h"] + 1
            and f["y"] >= max(bottom(m), bottom(a)) - 0.5 and abs(f["x"]) <= 0.5 and abs(f["w"] - window["w"]) <= 0.5)


def full_width(parts: dict, window: dict) -> bool:
    h = parts["header"]
    return h is not None and abs(h["x"]) <= 0.5 and abs(h["y"]) <= 0.5 and abs(h["w"] - window["w"]) <= 0.5


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1200, height=800)
    c.score("landmarks", landmarks(page))
    wide, wide_window = page.evaluate(PARTS), page.evaluate(WINDOW)
    c.screenshot(page)
    m, a, h = wide["main"], wide["aside"], wide["header"]
    c.score("wide_columns", None not in (m, a, h) and webcheck.apart([h, m, a]) and a["x"] >= m["x"] + m["w"] - 0.5
            and a["y"] < bottom(m) and m["y"] < bottom(a) and m["w"] > a["w"] and min(m["y"], a["y"]) >= bottom(h) - 0.5)
    narrow_page = c.open("index.html", width=500, height=900)
    narrow, narrow_window = narrow_page.evaluate(PARTS), narrow_page.evaluate(WINDOW)
    m, a, h = narrow["main"], narrow["aside"], narrow["header"]
    c.score("narrow_stacked", None not in (m, a, h) and webcheck.apart([h, m, a]) and a["y"] >= bottom(m) - 0.5
            and m["w"] >= 400 and a["w"] >= 400 and m["y"] >= bottom(h) - 0.5)
    c.score("header_full_width", full_width(wide, wide_window) and full_width(narrow, narrow_window))
    c.score("sticky_footer", sticky(wide, wide_window) and sticky(narrow, narrow_window))
    page.evaluate(LONGER)
    long, window = page.evaluate(PARTS), page.evaluate(WINDOW)
    f, m, a = long["footer"], long["main"], long["aside"]
    c.score("footer_follows_content", None not in (f, m, a) and window["scroll"] > window["h"]
            and f["y"] >= max(bottom(m), bottom(a)) - 0.5 and abs(bottom(f) - window["scroll"]) <= 1)


webcheck.run(["landmarks", "header_full_width", "wide_columns", "narrow_stacked", "sticky_footer",
              "footer_follows_content", "no_console_errors"], check)
