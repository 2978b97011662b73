#!/bin/bash
set -e
cat > /app/style.css <<'CSS'
html, body { margin: 0; }
body { min-height: 100vh; display: flex; flex-direction: column; font-family: sans-serif; color: #222; }
header { background: #234; color: #fff; padding: 12px 24px; }
header h1 { margin: 0 0 8px; }
header nav a { color: #fff; margin-right: 16px; }
.content { flex: 1; display: flex; gap: 24px; padding: 24px; }
main { flex: 3; }
aside { flex: 1; background: #f3f3f3; padding: 0 12px; }
footer { background: #ddd; padding: 12px 24px; }
@media (max-width: 800px) {
  .content { flex-direction: column; }
  main, aside { flex: none; }
}
CSS
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Field notes</title><link rel="stylesheet" href="style.css"></head>
<body>
  <header>
    <h1>Field notes</h1>
    <nav><a href="#">Home</a><a href="#">Archive</a><a href="#">About</a></nav>
  </header>
  <div class="content">
    <main>
      <h2>Latest entry</h2>
      <p>The heron was back at the pond this morning. It stood in the reeds for an hour, then took a fish
      and flew off to the north.</p>
    </main>
    <aside><h2>Tags</h2></aside>
  </div>
  <footer>Field notes, 2024</footer>
</body>
</html>
HTML
