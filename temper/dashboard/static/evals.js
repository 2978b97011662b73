// The eval, compare and envqa pages: each chart is an element with class "evchart" whose data-chart (JSON,
// built by eval_pages.py) says what to draw; a task's evidence is fetched when its <details> opens, so a
// report of thousands of tasks does not send every task file with the page.
"use strict";

// Bars of several series side by side per named group (A vs B per suite); x ticks are the names.
temper.groups = function (el, title, names, ys, labels, opts = {}) {
  el.classList.add("chart");
  el.innerHTML = `<div class="title"></div>`;
  el.querySelector(".title").textContent = title;
  const short = (s) => (s && s.length > 28 ? s.slice(0, 27) + "…" : s || "");
  const xs = names.map((_, i) => i + 1);
  const series = [{label: "suite", value: (u, v) => (v == null ? "" : names[v - 1] || "")}];
  ys.forEach((y, i) => {
    const color = temper.colors[i % temper.colors.length];
    series.push({label: labels[i], stroke: color, fill: color + "b0", width: 1, points: {show: false},
                 paths: uPlot.paths.bars({size: [0.8 / ys.length, 48], align: ys.length === 2 ? (i ? 1 : -1) : 0})});
  });
  const width = opts.width || Math.min(1100, Math.max(420, 130 * names.length));
  const plot = new uPlot({width, height: opts.height || 220, series, legend: {show: true, live: false},
                          scales: {x: {time: false, range: [0.5, names.length + 0.5]},
                                   y: {range: (u, lo, hi) => [Math.min(0, lo), Math.max(1, hi)]}},
                          axes: [{size: 32, incrs: [1], values: (u, splits) => splits.map((v) => short(names[v - 1]))},
                                 {size: 48}]},
                         [xs, ...ys], el);
  el.dataset.points = String(names.length);
  return plot;
};

temper.drawSpec = function (el) {
  const c = JSON.parse(el.dataset.chart);
  if (c.kind === "bars") return temper.bars(el, c.title, c.xs, c.counts, {xlabel: c.xlabel});
  if (c.kind === "groups") return temper.groups(el, c.title, c.names, c.ys, c.labels);
  return temper.line(el, c.title, c.xs, c.ys, {labels: c.labels, xlabel: c.xlabel, width: 380, height: 180});
};

document.querySelectorAll(".evchart").forEach((el) => temper.drawSpec(el));

document.querySelectorAll("details.evidence").forEach((d) => d.addEventListener("toggle", async () => {
  const row = d.closest("tbody").querySelector(".evidence-row");
  row.hidden = !d.open;
  if (!d.open || d.dataset.loaded) return;
  d.dataset.loaded = "1";
  const pre = row.querySelector("pre");
  try {
    const body = await (await fetch(d.dataset.url)).json();
    if (body.error) {
      pre.textContent = body.error;
      pre.classList.add("problem");
    } else {
      pre.textContent = JSON.stringify(body.evidence, null, 1);
    }
  } catch (e) {
    pre.textContent = String(e);
    pre.classList.add("problem");
  }
  pre.dataset.loaded = "1";
}));
