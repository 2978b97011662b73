#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sales by region</title></head>
<body>
  <h1>Sales by region</h1>
  <svg id="chart" width="640" height="320"></svg>
  <script src="chart.js"></script>
</body>
</html>
HTML
cat > /app/chart.js <<'JS'
const NS = "http://www.w3.org/2000/svg";

function draw(rows) {
  const svg = document.getElementById("chart");
  const max = Math.max(...rows.map((r) => r.sales));
  const base = 280, top = 40, width = 80, gap = 30;
  rows.forEach((r, i) => {
    const h = (r.sales / max) * (base - top);
    const bar = document.createElementNS(NS, "rect");
    bar.setAttribute("class", "bar");
    bar.setAttribute("data-region", r.region);
    bar.setAttribute("x", 20 + i * (width + gap));
    bar.setAttribute("y", base - h);
    bar.setAttribute("width", width);
    bar.setAttribute("height", h);
    bar.setAttribute("fill", "#4a7");
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", 20 + i * (width + gap) + width / 2);
    label.setAttribute("y", base + 20);
    label.setAttribute("text-anchor", "middle");
    label.textContent = r.region;
    svg.append(bar, label);
  });
}

fetch("sales.csv")
  .then((res) => res.text())
  .then((text) => {
    const rows = text.trim().split("\n").slice(1).map((line) => {
      const [region, sales] = line.split(",");
      return { region: region.trim(), sales: Number(sales) };
    });
    draw(rows);
  });
JS
