"""Open the scatter plot over data the agent has not seen (this checker rewrites flowers.csv first: the page must
read it; its species first appear in another order) and score each requirement of the instruction, one reward
component each."""

import itertools
from pathlib import Path

import webcheck

COLOURS = {"setosa": (31, 119, 180), "versicolor": (255, 127, 14), "virginica": (44, 160, 44)}
DATA = [("versicolor", 5, 4), ("virginica", 8, 8), ("setosa", 1, 1.5), ("versicolor", 6, 5), ("setosa", 0, 0),
        ("virginica", 9, 7), ("versicolor", 4.5, 5.5), ("setosa", 2, 0.5), ("virginica", 10, 10),
        ("setosa", 1.5, 2.5), ("virginica", 7.5, 9), ("versicolor", 6.5, 3.5)]
GROUPS = ["versicolor", "virginica", "setosa"]  # in order of first appearance
POINTS = """[...document.querySelectorAll('svg circle.point')].map(p => { const r = p.getBoundingClientRect();
  return {group: p.getAttribute('data-group'), x: p.getAttribute('data-x'), y: p.getAttribute('data-y'),
          cx: r.left + r.width / 2, cy: r.top + r.height / 2, w: r.width, h: r.height, fill: getComputedStyle(p).fill}; })"""
LEGEND = """[...document.querySelectorAll('#legend .legend-item')].map(i => { const r = i.getBoundingClientRect();
  return {group: i.getAttribute('data-group'), text: i.textContent.trim(), x: r.left, y: r.top,
          parts: [i, ...i.querySelectorAll('*')].map(e => { const b = e.getBoundingClientRect(), s = getComputedStyle(e);
            return {fill: s.fill, bg: s.backgroundColor, cx: b.left + b.width / 2, cy: b.top + b.height / 2, w: b.width,
                    h: b.height}; })}; })"""


def colour(css: str) -> tuple[int, int, int] | None:
    try:
        return webcheck.rgb(css)
    except ValueError:  # `none`, a url(...): no colour
        return None


def number(text: str | None) -> float | None:
    try:
        return float(text or "")
    except ValueError:
        return None


def linear(pos: list[float], values: list[float]) -> bool:
    """Each position within 1.5 px of the line through the smallest and the largest value's positions."""
    lo, hi = values.index(min(values)), values.index(max(values))
    slope = (pos[hi] - pos[lo]) / (values[hi] - values[lo])
    return all(abs(p - (pos[lo] + slope * (v - values[lo]))) <= 1.5 for p, v in zip(pos, values, strict=True))


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    c.wait_for(page, "document.querySelectorAll('svg circle.point').length > 0")
    c.score("svg", page.locator("svg").count() >= 1)
    shot = c.screenshot(page)
    at = lambda x, y: shot.getpixel((int(x), int(y))) if 0 <= x < shot.width and 0 <= y < shot.height else ()  # noqa: E731
    pts = page.evaluate(POINTS)
    c.score("points", [(p["group"], number(p["x"]), number(p["y"])) for p in pts] == [(g, float(x), float(y))
                                                                                    for g, x, y in DATA]
            and all(8 <= p["w"] <= 16.5 and 8 <= p["h"] <= 16.5 for p in pts))
    if c.got["points"]:
        xs, ys = [p["cx"] for p in pts], [p["cy"] for p in pts]
        c.score("positions", linear(xs, [x for _, x, _ in DATA]) and linear(ys, [y for _, _, y in DATA])
                and xs[8] - xs[4] >= 300 and ys[4] - ys[8] >= 200)  # row 4 is the smallest x and y, row 8 the largest
        c.score("fill", all(colour(p["fill"]) == COLOURS[p["group"]] for p in pts))
        c.score("pixels", all(len(at(p["cx"], p["cy"])) and webcheck.near(at(p["cx"], p["cy"]), COLOURS[p["group"]])
                              for p in pts))
    items = page.evaluate(LEGEND)
    xs, ys = [i["x"] for i in items], [i["y"] for i in items]
    c.score("legend", [(i["group"], i["text"]) for i in items] == [(g, g) for g in GROUPS]
            and (all(a < b for a, b in itertools.pairwise(ys)) or all(a < b for a, b in itertools.pairwise(xs))))
    c.score("swatches", sorted(i["group"] for i in items) == sorted(GROUPS) and all(
        any(s["w"] >= 8 and s["h"] >= 8 and COLOURS[i["group"]] in (colour(s["fill"]), colour(s["bg"]))
            and len(at(s["cx"], s["cy"])) and webcheck.near(at(s["cx"], s["cy"]), COLOURS[i["group"]]) for s in i["parts"])
        for i in items))


Path("/app/flowers.csv").write_text("group,x,y\n" + "".join(f"{g},{x},{y}\n" for g, x, y in DATA))
webcheck.run(["svg", "points", "positions", "fill", "pixels", "legend", "swatches", "no_console_errors"], check)
