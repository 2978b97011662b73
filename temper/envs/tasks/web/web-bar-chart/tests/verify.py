"""Open the chart over data the agent has not seen (this checker rewrites sales.csv first: the page must read
it) and score each requirement of the instruction, one reward component each."""

import itertools
from pathlib import Path

import webcheck

DATA = [("North", 80), ("South", 260), ("East", 40), ("West", 150), ("Central", 200), ("Islands", 15)]
BARS = """[...document.querySelectorAll('svg rect.bar')].map(b => { const r = b.getBoundingClientRect();
  return {region: b.getAttribute('data-region'), x: r.left, y: r.top, w: r.width, h: r.height}; })"""
LABELS = """[...document.querySelectorAll('svg text')].map(t => { const r = t.getBoundingClientRect();
  return {text: t.textContent.trim(), cx: r.left + r.width / 2, y: r.top}; })"""


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    c.wait_for(page, "document.querySelectorAll('svg rect.bar').length > 0")
    c.score("svg", page.locator("svg").count() >= 1)
    c.screenshot(page)
    bars = page.evaluate(BARS)
    if not c.score("bars", [b["region"] for b in bars] == [r for r, _ in DATA] and all(b["w"] > 0 for b in bars)):
        return
    top, peak = max(bars, key=lambda b: b["h"]), max(v for _, v in DATA)
    c.score("proportional", top["h"] >= 200 and all(abs(b["h"] / top["h"] - v / peak) <= 0.02
                                                      for b, (_, v) in zip(bars, DATA, strict=True)))
    c.score("baseline", max(b["y"] + b["h"] for b in bars) - min(b["y"] + b["h"] for b in bars) <= 1.5)
    c.score("no_overlap", all(a["x"] + a["w"] <= b["x"] + 0.5 for a, b in itertools.pairwise(bars)))
    labels = page.evaluate(LABELS)
    c.score("labels", all(any(t["text"] == b["region"] and b["x"] <= t["cx"] <= b["x"] + b["w"]
                              and t["y"] >= b["y"] + b["h"] - 2 for t in labels) for b in bars))


Path("/app/sales.csv").write_text("region,sales\n" + "".join(f"{r},{v}\n" for r, v in DATA))
webcheck.run(["svg", "bars", "proportional", "baseline", "no_overlap", "labels", "no_console_errors"], check)
