#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Contact us</title><link rel="stylesheet" href="style.css"></head>
<body>
  <h1>Contact us</h1>
  <div class="form">
    <div class="row"><label class="caption" for="name">Name</label><input id="name" type="text"></div>
    <div class="row"><label class="caption" for="email">Email</label><input id="email" type="email"></div>
    <div class="row"><label class="caption" for="message">Message</label><textarea id="message" rows="4"></textarea></div>
    <div class="row check"><input id="subscribe" type="checkbox"><label class="caption" for="subscribe">Send me the newsletter</label></div>
    <button type="button" class="send" onclick="send()">Send</button>
  </div>
  <p id="status"></p>
  <script src="form.js"></script>
</body>
</html>
HTML
cat >> /app/style.css <<'CSS'
button.send { border: 0; font: inherit; }
CSS
