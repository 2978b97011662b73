"""Render the pricing page at two window widths, read the featured card's colour off a screenshot, and score
each requirement of the instruction, one reward component each."""

import webcheck

PLANS = [("Basic", "$9/month"), ("Pro", "$29/month"), ("Team", "$99/month")]
BLUE = (0x1D, 0x4E, 0xD8)
CARDS = """[...document.querySelectorAll('.plan')].map(c => { const r = c.getBoundingClientRect();
  const buttons = [...c.querySelectorAll('button')].map(b => { const q = b.getBoundingClientRect();
    return {x: q.left, y: q.top, w: q.width, h: q.height, text: b.innerText.trim()}; });
  return {x: r.left, y: r.top, w: r.width, h: r.height, featured: c.classList.contains('featured'), buttons,
          name: c.querySelector('h2')?.innerText.trim(), price: c.querySelector('.price')?.innerText.trim()}; })"""


def inside(b: dict, c: dict) -> bool:
    return (c["x"] - 0.5 <= b["x"] and b["x"] + b["w"] <= c["x"] + c["w"] + 0.5 and c["y"] - 0.5 <= b["y"]
            and b["y"] + b["h"] <= c["y"] + c["h"] + 0.5)


def buttons_inside(cards: list[dict]) -> bool:
    return len(cards) == 3 and all(len(c["buttons"]) == 1 and c["buttons"][0]["text"] == "Choose"
                                   and c["buttons"][0]["w"] > 0 and inside(c["buttons"][0], c) for c in cards)


def blue_share(image, card: dict) -> float:
    """The share of a 12 x 12 grid of points in `card` (6 px in from its edges) whose pixel is the blue."""
    if card["w"] < 40 or card["h"] < 40:
        return 0.0
    points = [(int(card["x"] + 6 + (card["w"] - 12) * i / 11), int(card["y"] + 6 + (card["h"] - 12) * j / 11))
              for i in range(12) for j in range(12)]
    return sum(webcheck.near(image.getpixel(p), BLUE) for p in points
               if 0 <= p[0] < image.width and 0 <= p[1] < image.height) / len(points)


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1200, height=800)
    title = webcheck.boxes(page, "h1")
    c.score("heading", len(title) == 1 and title[0]["text"].strip() == "Pricing")
    wide = page.evaluate(CARDS)
    c.score("plans", [(b["name"], b["price"]) for b in wide] == PLANS)
    c.score("wide_row", len(wide) == 3 and len(title) == 1 and webcheck.apart([*title, *wide])
            and all(abs(b["y"] - wide[0]["y"]) <= 2 and b["w"] >= 250 for b in wide)
            and wide[0]["x"] < wide[1]["x"] < wide[2]["x"]
            and all(b["x"] >= 0 and b["y"] >= 0 and b["x"] + b["w"] <= 1200 and b["y"] + b["h"] <= 800 for b in wide))
    image = c.screenshot(page)
    c.score("featured", len(wide) == 3 and [b["featured"] for b in wide] == [False, True, False]
            and blue_share(image, wide[1]) >= 0.6 and blue_share(image, wide[0]) <= 0.1
            and blue_share(image, wide[2]) <= 0.1)
    narrow_page = c.open("index.html", width=420, height=800)
    narrow, narrow_title = narrow_page.evaluate(CARDS), webcheck.boxes(narrow_page, "h1")
    c.score("narrow_column", len(narrow) == 3 and len(narrow_title) == 1 and webcheck.apart([*narrow_title, *narrow])
            and all(b["w"] >= 300 and abs(b["x"] - narrow[0]["x"]) <= 2 for b in narrow)
            and narrow[0]["y"] < narrow[1]["y"] < narrow[2]["y"])
    c.score("buttons", buttons_inside(wide) and buttons_inside(narrow))


webcheck.run(["heading", "plans", "wide_row", "narrow_column", "featured", "buttons", "no_console_errors"], check)
