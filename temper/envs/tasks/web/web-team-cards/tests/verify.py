"""Render the team page at two window widths and score each requirement of the instruction, one reward
component each."""

import webcheck

PEOPLE = [("Ada Lovelace", "Engineer"), ("Grace Hopper", "Admiral"), ("Alan Turing", "Scientist")]
CARDS = """[...document.querySelectorAll('.card')].map(c => { const r = c.getBoundingClientRect();
  return {x: r.left, y: r.top, w: r.width, h: r.height, border: parseFloat(getComputedStyle(c).borderTopWidth),
          name: c.querySelector('h2')?.innerText.trim(), role: c.querySelector('p')?.innerText.trim()}; })"""


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1200, height=800)
    c.score("heading", page.locator("h1").count() == 1 and page.locator("h1").inner_text().strip() == "Our team")
    wide = page.evaluate(CARDS)
    c.score("cards", [(b["name"], b["role"]) for b in wide] == PEOPLE)
    c.score("wide_row", len(wide) == 3 and webcheck.apart(wide) and all(abs(b["y"] - wide[0]["y"]) <= 2 for b in wide)
            and wide[0]["x"] < wide[1]["x"] < wide[2]["x"])
    c.score("borders", len(wide) == 3 and all(b["border"] >= 1 for b in wide))
    c.screenshot(page)
    narrow = c.open("index.html", width=400, height=800).evaluate(CARDS)
    c.score("narrow_column", len(narrow) == 3 and webcheck.apart(narrow) and all(b["w"] >= 300 for b in narrow)
            and all(abs(b["x"] - narrow[0]["x"]) <= 2 for b in narrow) and narrow[0]["y"] < narrow[1]["y"] < narrow[2]["y"])


webcheck.run(["heading", "cards", "wide_row", "narrow_column", "borders", "no_console_errors"], check)
