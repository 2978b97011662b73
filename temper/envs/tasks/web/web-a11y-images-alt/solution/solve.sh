#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Northwind Bakery</title><link rel="stylesheet" href="style.css"></head>
<body>
  <header><img src="logo.svg" width="64" height="64" alt="Northwind Bakery"></header>
  <h1 class="title">Fresh from the oven</h1>
  <img src="divider.svg" class="divider" width="600" height="12" alt="">
  <h2><img src="wheat.svg" width="24" height="24" alt=""> Our bread</h2>
  <img src="loaf.svg" width="300" height="200" alt="A round sourdough loaf on a wooden board">
  <p>Every loaf is shaped by hand and baked in a stone oven before sunrise.</p>
  <h2><img src="wheat.svg" width="24" height="24" alt=""> Opening hours</h2>
  <img src="hours.svg" width="300" height="120" alt="Open Tuesday to Sunday, closed on Monday">
  <p><img src="phone.svg" width="16" height="16" alt=""> Call us: 555-0100</p>
</body>
</html>
HTML
sed -i 's/^h1 /h2 /' /app/style.css
