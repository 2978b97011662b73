#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Flowers</title>
<style>
  body { font-family: sans-serif; margin: 16px; }
  .point { stroke: #fff; stroke-width: 1; }
  .axis { stroke: #555; stroke-width: 1; }
  text { font-size: 12px; fill: #222; }
</style></head>
<body>
  <h1>Flowers</h1>
  <svg id="chart" width="760" height="460"></svg>
  <script src="scatter.js"></script>
</body>
</html>
HTML
cat > /app/scatter.js <<'JS'
const NS = "http://www.w3.org/2000/svg";
const COLOURS = { setosa: "#1f77b4", versicolor: "#ff7f0e", virginica: "#2ca02c" };
const LEFT = 60, RIGHT = 560, TOP = 20, BOTTOM = 400;

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function scale(values, from, to) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (hi === lo) { lo -= 1; hi += 1; }
  const pad = (hi - lo) * 0.05;
  lo -= pad; hi += pad;
  return (v) => from + ((v - lo) / (hi - lo)) * (to - from);
}

function draw(rows, names) {
  const svg = document.getElementById("chart");
  const x = scale(rows.map((r) => r.x), LEFT, RIGHT);
  const y = scale(rows.map((r) => r.y), BOTTOM, TOP);
  svg.append(el("line", { class: "axis", x1: LEFT, x2: LEFT, y1: TOP, y2: BOTTOM }));
  svg.append(el("line", { class: "axis", x1: LEFT, x2: RIGHT, y1: BOTTOM, y2: BOTTOM }));
  svg.append(el("text", { x: (LEFT + RIGHT) / 2, y: BOTTOM + 30, "text-anchor": "middle" }, names[1]));
  svg.append(el("text", { x: 20, y: (TOP + BOTTOM) / 2, "text-anchor": "middle",
                          transform: `rotate(-90 20 ${(TOP + BOTTOM) / 2})` }, names[2]));
  for (const r of rows) {
    svg.append(el("circle", { class: "point", cx: x(r.x), cy: y(r.y), r: 6, fill: COLOURS[r.group] || "#777",
                              "data-group": r.group, "data-x": r.rawX, "data-y": r.rawY }));
  }
  const legend = el("g", { id: "legend", transform: `translate(${RIGHT + 40}, ${TOP + 10})` });
  const groups = [...new Set(rows.map((r) => r.group))];
  groups.forEach((g, i) => {
    const item = el("g", { class: "legend-item", "data-group": g, transform: `translate(0, ${i * 24})` });
    item.append(el("rect", { width: 14, height: 14, fill: COLOURS[g] || "#777" }));
    item.append(el("text", { x: 22, y: 7, "dominant-baseline": "middle" }, g));
    legend.append(item);
  });
  svg.append(legend);
}

fetch("flowers.csv")
  .then((res) => res.text())
  .then((text) => {
    const lines = text.trim().split(/\r?\n/).filter((line) => line.trim());
    const names = lines[0].split(",").map((s) => s.trim());
    const rows = lines.slice(1).map((line) => {
      const [group, rawX, rawY] = line.split(",").map((s) => s.trim());
      return { group, rawX, rawY, x: Number(rawX), y: Number(rawY) };
    });
    draw(rows, names);
  });
JS
