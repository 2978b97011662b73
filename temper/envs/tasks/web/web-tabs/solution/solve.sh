#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Laptop</title>
<style>
  body { font-family: sans-serif; margin: 32px; }
  [role="tablist"] { display: flex; gap: 4px; border-bottom: 2px solid #445; }
  [role="tab"] { font: inherit; padding: 8px 16px; border: 1px solid #aab; border-bottom: none; background: #eef; }
  [role="tab"][aria-selected="true"] { background: #445; color: #fff; }
  [role="tabpanel"] { padding: 16px; border: 1px solid #aab; border-top: none; }
</style></head>
<body>
  <h1>Laptop</h1>
  <div role="tablist" aria-label="Laptop details">
    <button type="button" role="tab" id="tab-overview" aria-controls="panel-overview" aria-selected="true">Overview</button>
    <button type="button" role="tab" id="tab-specs" aria-controls="panel-specs" aria-selected="false" tabindex="-1">Specs</button>
    <button type="button" role="tab" id="tab-reviews" aria-controls="panel-reviews" aria-selected="false" tabindex="-1">Reviews</button>
  </div>
  <div role="tabpanel" id="panel-overview" aria-labelledby="tab-overview"><p>A light, fast laptop.</p></div>
  <div role="tabpanel" id="panel-specs" aria-labelledby="tab-specs" hidden><p>16 GB of memory and a 1 TB disk.</p></div>
  <div role="tabpanel" id="panel-reviews" aria-labelledby="tab-reviews" hidden><p>Rated 4.5 out of 5 by 212 buyers.</p></div>
  <script src="tabs.js"></script>
</body>
</html>
HTML
cat > /app/tabs.js <<'JS'
const tabs = [...document.querySelectorAll('[role="tab"]')];

function select(tab) {
  tabs.forEach((t) => {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
  });
}

tabs.forEach((tab) => tab.addEventListener("click", () => select(tab)));

document.querySelector('[role="tablist"]').addEventListener("keydown", (event) => {
  const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
  if (!step) return;
  const next = tabs[(tabs.indexOf(document.activeElement) + step + tabs.length) % tabs.length];
  select(next);
  next.focus();
  event.preventDefault();
});
JS
