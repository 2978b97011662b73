"""Open the chart over data the agent has not seen (this checker rewrites visits.csv first: the page must read
it) and score each requirement of the instruction, one reward component each."""

import itertools
from pathlib import Path

import webcheck

DATA = [("Jan", 340), ("Feb", 120), ("Mar", 510), ("Apr", 480), ("May", 75), ("Jun", 260), ("Jul", 600),
        ("Aug", 430), ("Sep", 200)]
POINTS = """[...document.querySelectorAll('svg circle.point')].map(p => { const r = p.getBoundingClientRect();
  return {x: p.getAttribute('data-x'), y: p.getAttribute('data-y'), cx: r.left + r.width / 2, cy: r.top + r.height / 2,
          w: r.width}; })"""
TEXTS = """sel => [...document.querySelectorAll(sel)].map(t => { const r = t.getBoundingClientRect();
  return {text: t.textContent.trim(), x: r.left, y: r.top, w: r.width, h: r.height}; })"""
LINE = """() => { const ls = document.querySelectorAll('svg polyline.line, svg path.line');
  if (ls.length !== 1 || !ls[0].getTotalLength) return null; const l = ls[0], m = l.getScreenCTM(), s = getComputedStyle(l);
  const n = l.getTotalLength(), pts = [];
  for (let d = 0; d <= n; d += 0.5) { const p = l.getPointAtLength(d).matrixTransform(m); pts.push([p.x, p.y]); }
  return {pts, fill: s.fill, stroke: s.stroke, width: parseFloat(s.strokeWidth), opacity: parseFloat(s.strokeOpacity)}; }"""


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    c.wait_for(page, "document.querySelectorAll('svg circle.point').length > 0")
    c.score("svg", page.locator("svg").count() >= 1)
    c.screenshot(page)
    pts = page.evaluate(POINTS)
    if not c.score("points", [(p["x"], number(p["y"] or "")) for p in pts] == [(k, float(v)) for k, v in DATA]
                   and all(p["w"] > 0 and 0 <= p["cx"] <= 1000 and 0 <= p["cy"] <= 700 for p in pts)):
        return
    gaps = [b["cx"] - a["cx"] for a, b in itertools.pairwise(pts)]
    c.score("x_order", all(g > 0 for g in gaps) and max(gaps) - min(gaps) <= 1 and pts[-1]["cx"] - pts[0]["cx"] >= 400)
    lo, hi = min(range(len(DATA)), key=lambda i: DATA[i][1]), max(range(len(DATA)), key=lambda i: DATA[i][1])
    slope = (pts[hi]["cy"] - pts[lo]["cy"]) / (DATA[hi][1] - DATA[lo][1])  # px per unit: negative, higher is up
    at = lambda v: pts[lo]["cy"] + slope * (v - DATA[lo][1])  # noqa: E731
    c.score("y_scale", pts[lo]["cy"] - pts[hi]["cy"] >= 150
            and all(abs(p["cy"] - at(v)) <= 1.5 for p, (_, v) in zip(pts, DATA, strict=True)))
    line = page.evaluate(LINE)
    c.score("line", line is not None and line["fill"] == "none" and line["stroke"] not in ("none", "")
            and line["width"] >= 1 and line["opacity"] > 0
            and all(min((x - p["cx"]) ** 2 + (y - p["cy"]) ** 2 for x, y in line["pts"]) <= 4 for p in pts))
    xl = page.evaluate(TEXTS, "svg text.x-label")
    low = max(p["cy"] for p in pts)
    c.score("x_labels", len(xl) == len(DATA) and all(
        t["text"] == k and abs(t["x"] + t["w"] / 2 - p["cx"]) <= 10 and t["y"] >= low
        for t, p, (k, _) in zip(xl, pts, DATA, strict=True)))
    yl = page.evaluate(TEXTS, "svg text.y-label")
    left = min(p["cx"] for p in pts)
    c.score("y_labels", len(yl) >= 3 and all(
        number(t["text"]) is not None and t["x"] + t["w"] <= left and abs(t["y"] + t["h"] / 2 - at(number(t["text"]))) <= 5
        for t in yl))


Path("/app/visits.csv").write_text("month,visits\n" + "".join(f"{k},{v}\n" for k, v in DATA))
webcheck.run(["svg", "points", "x_order", "y_scale", "line", "x_labels", "y_labels", "no_console_errors"], check)
