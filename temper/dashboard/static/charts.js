// Charts of the dashboard, drawn with uPlot. Each chart's element carries data-points (how many points
// it draws) so that a test, or a person with the inspector, can tell what is on the canvas.
"use strict";

const temper = {
  charts: {},

  // A line chart of ys over xs (nulls are gaps) in el; returns the uPlot instance.
  line(el, title, xs, ys, opts = {}) {
    el.classList.add("chart");
    el.innerHTML = `<div class="title"></div>`;
    el.querySelector(".title").textContent = title;
    const series = [{label: opts.xlabel || "step"}];
    const data = [xs];
    const list = Array.isArray(ys[0]) ? ys : [ys];  // one series, or several
    const labels = opts.labels || [title];
    list.forEach((y, i) => {
      series.push({label: labels[i] || title, stroke: temper.colors[i % temper.colors.length], width: 1.5,
                   points: {show: xs.length < 60}, spanGaps: false});
      data.push(y);
    });
    const plot = new uPlot({width: opts.width || 320, height: opts.height || 150, series,
                            scales: {x: {time: false}, y: {range: temper.yRange}}, legend: {show: list.length > 1},
                            axes: [{size: 28}, {size: 52, values: (u, vals) => vals.map(temper.fmt)}]}, data, el);
    el.dataset.points = String(xs.length);
    return plot;
  },

  // Bars: counts per bin (a histogram) as a stepped line with filled area.
  bars(el, title, edges, counts, opts = {}) {
    el.classList.add("chart");
    el.innerHTML = `<div class="title"></div>`;
    el.querySelector(".title").textContent = title;
    const plot = new uPlot({width: opts.width || 360, height: opts.height || 170,
                            series: [{label: opts.xlabel || "x"}, {label: "count", stroke: temper.colors[0],
                                      fill: "rgba(42,111,219,0.25)", paths: uPlot.paths.bars({size: [0.9]})}],
                            scales: {x: {time: false}}, legend: {show: false}}, [edges, counts], el);
    el.dataset.points = String(counts.length);
    return plot;
  },

  // Axis numbers: 3 significant digits, so that 0.0004 s does not read as 0.
  fmt(v) {
    if (v === null || v === undefined) return "";
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e4) return v.toLocaleString("en", {maximumFractionDigits: 0});
    return a < 1e-3 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
  },

  // A flat series gets a band around its value rather than uPlot's 0-100 default.
  yRange(u, min, max) {
    if (min === null || max === null) return [0, 1];
    if (min === max) return [min - Math.max(1, Math.abs(min) * 0.1), max + Math.max(1, Math.abs(max) * 0.1)];
    return uPlot.rangeNum(min, max, 0.1, true);
  },

  colors: ["#2a6fdb", "#e67e22", "#1e8449", "#8e44ad", "#c0392b", "#16a085"],
};

// A run's metrics: one chart per numeric field, extended in place while the run writes.
temper.liveMetrics = async function (root, key, status) {
  let rows = 0;
  const series = {};
  async function pull() {
    const r = await fetch(`/api/metrics?f=${encodeURIComponent(key)}&since=${rows}`);
    const body = await r.json();
    if (body.error) { root.textContent = body.error; return "error"; }
    const n = body.rows;
    const fields = Object.keys(body.series);
    for (const k of fields) {
      if (!series[k]) series[k] = new Array(rows).fill(null);
    }
    for (const k of Object.keys(series)) {
      const add = body.series[k] || new Array(n).fill(null);
      series[k].push(...add);
    }
    rows += n;
    const steps = series.step || [...Array(rows).keys()].map((i) => i + 1);
    for (const k of Object.keys(series)) {
      if (k === "step" || k === "elapsed_s") continue;
      let el = root.querySelector(`[data-field="${CSS.escape(k)}"]`);
      if (!el) {
        el = document.createElement("div");
        el.dataset.field = k;
        root.appendChild(el);
        temper.charts[k] = temper.line(el, k, steps.slice(), series[k].slice());
      } else if (n > 0) {
        temper.charts[k].setData([steps.slice(), series[k].slice()]);
        el.dataset.points = String(steps.length);
      }
    }
    root.dataset.rows = String(rows);
    const badge = document.getElementById("status");
    if (badge && body.status) { badge.textContent = body.status; badge.className = "badge " + body.status.replace(/[^a-z]+/g, "-").replace(/-$/, ""); }
    document.getElementById("steps") && (document.getElementById("steps").textContent = String(rows));
    for (const p of body.problems || []) {
      if (![...document.querySelectorAll(".metrics-problem")].some((e) => e.textContent === p)) {
        const el = document.createElement("p"); el.className = "problem metrics-problem"; el.textContent = p;
        root.before(el);
      }
    }
    return body.status;
  }
  let st = await pull();
  const timer = setInterval(async () => {
    st = await pull();
    if (st !== "running") clearInterval(timer);
  }, Number(root.dataset.refreshMs || 2000));
};
