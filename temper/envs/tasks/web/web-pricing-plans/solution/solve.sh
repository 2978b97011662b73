#!/bin/bash
set -e
cat > /app/style.css <<'CSS'
body { font-family: sans-serif; margin: 24px; color: #1f2937; }
h1 { text-align: center; }
.plans { display: flex; gap: 24px; }
.plan { flex: 1; border: 1px solid #d1d5db; border-radius: 10px; padding: 20px; background: #ffffff; }
.plan h2 { margin-top: 0; }
.price { font-size: 28px; font-weight: bold; margin: 12px 0 20px; }
.plan button { padding: 8px 20px; font-size: 16px; }
.featured { background: #1d4ed8; color: #ffffff; border-color: #1d4ed8; }
@media (max-width: 700px) {
  .plans { flex-direction: column; }
}
CSS
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pricing</title><link rel="stylesheet" href="style.css"></head>
<body>
  <h1>Pricing</h1>
  <div class="plans">
    <div class="plan"><h2>Basic</h2><p class="price">$9/month</p><button type="button">Choose</button></div>
    <div class="plan featured"><h2>Pro</h2><p class="price">$29/month</p><button type="button">Choose</button></div>
    <div class="plan"><h2>Team</h2><p class="price">$99/month</p><button type="button">Choose</button></div>
  </div>
</body>
</html>
HTML
