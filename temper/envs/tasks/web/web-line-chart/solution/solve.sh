#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Visits</title>
<style>
  body { font-family: sans-serif; margin: 16px; }
  .line { fill: none; stroke: #1d4ed8; stroke-width: 2; }
  .point { fill: #1d4ed8; stroke: #fff; stroke-width: 1.5; }
  .axis { stroke: #555; stroke-width: 1; }
  .grid { stroke: #ddd; stroke-width: 1; }
  text { font-size: 12px; fill: #222; }
</style></head>
<body>
  <h1>Visits</h1>
  <svg id="chart" width="800" height="440"></svg>
  <script src="chart.js"></script>
</body>
</html>
HTML
cat > /app/chart.js <<'JS'
const NS = "http://www.w3.org/2000/svg";
const LEFT = 60, RIGHT = 760, TOP = 20, BOTTOM = 380;

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function niceStep(max) {
  const p = Math.pow(10, Math.floor(Math.log10(max)));
  const r = max / p;
  return r > 5 ? p : r > 2 ? p / 2 : p / 5;
}

function draw(rows) {
  const svg = document.getElementById("chart");
  const max = Math.max(...rows.map((r) => r.value), 1);
  const step = niceStep(max);
  const top = Math.ceil(max / step) * step;
  const x = (i) => (rows.length === 1 ? (LEFT + RIGHT) / 2 : LEFT + (i * (RIGHT - LEFT)) / (rows.length - 1));
  const y = (v) => BOTTOM - (v / top) * (BOTTOM - TOP);
  for (let v = 0; v <= top + step / 2; v += step) {
    svg.append(el("line", { class: "grid", x1: LEFT, x2: RIGHT, y1: y(v), y2: y(v) }));
    svg.append(el("text", { class: "y-label", x: LEFT - 8, y: y(v), "text-anchor": "end",
                            "dominant-baseline": "middle" }, String(v)));
  }
  svg.append(el("line", { class: "axis", x1: LEFT, x2: LEFT, y1: TOP, y2: BOTTOM }));
  svg.append(el("line", { class: "axis", x1: LEFT, x2: RIGHT, y1: BOTTOM, y2: BOTTOM }));
  svg.append(el("polyline", { class: "line", points: rows.map((r, i) => x(i) + "," + y(r.value)).join(" ") }));
  rows.forEach((r, i) => {
    svg.append(el("circle", { class: "point", cx: x(i), cy: y(r.value), r: 5, "data-x": r.label, "data-y": r.raw }));
    svg.append(el("text", { class: "x-label", x: x(i), y: BOTTOM + 20, "text-anchor": "middle" }, r.label));
  });
}

fetch("visits.csv")
  .then((res) => res.text())
  .then((text) => {
    const rows = text.trim().split(/\r?\n/).slice(1).filter((line) => line.trim()).map((line) => {
      const [label, value] = line.split(",");
      return { label: label.trim(), raw: value.trim(), value: Number(value) };
    });
    draw(rows);
  });
JS
