#!/bin/bash
set -e
cat > /app/style.css <<'CSS'
body { font-family: sans-serif; margin: 24px; }
.cards { display: flex; gap: 16px; }
.card { flex: 1; border: 2px solid #334; border-radius: 8px; padding: 12px; }
@media (max-width: 700px) {
  .cards { flex-direction: column; }
  .card { min-width: 300px; }
}
CSS
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Our team</title><link rel="stylesheet" href="style.css"></head>
<body>
  <h1>Our team</h1>
  <div class="cards">
    <div class="card"><h2>Ada Lovelace</h2><p>Engineer</p></div>
    <div class="card"><h2>Grace Hopper</h2><p>Admiral</p></div>
    <div class="card"><h2>Alan Turing</h2><p>Scientist</p></div>
  </div>
</body>
</html>
HTML
