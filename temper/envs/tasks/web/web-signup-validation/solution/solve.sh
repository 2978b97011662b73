#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign up</title>
<style>
  body { font-family: sans-serif; margin: 32px; }
  .field { margin-bottom: 14px; }
  label { display: block; margin-bottom: 4px; }
  .error { color: #b00020; margin: 4px 0 0; }
  #success { color: #1b5e20; font-weight: bold; }
</style></head>
<body>
  <h1>Sign up</h1>
  <form id="signup" novalidate>
    <div class="field"><label for="email">Email</label><input id="email" type="email">
      <p class="error" id="email-error" hidden></p></div>
    <div class="field"><label for="password">Password</label><input id="password" type="password">
      <p class="error" id="password-error" hidden></p></div>
    <div class="field"><label for="confirm">Confirm password</label><input id="confirm" type="password">
      <p class="error" id="confirm-error" hidden></p></div>
    <button type="submit">Sign up</button>
  </form>
  <p id="success" hidden></p>
  <script src="signup.js"></script>
</body>
</html>
HTML
cat > /app/signup.js <<'JS'
const form = document.getElementById("signup");

function show(id, message) {
  const el = document.getElementById(id);
  el.textContent = message || "";
  el.hidden = !message;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const email = document.getElementById("email").value;
  const password = document.getElementById("password").value;
  const confirm = document.getElementById("confirm").value;
  const errors = {
    "email-error": /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) ? "" : "Enter a valid email address.",
    "password-error": password.length >= 8 && /\d/.test(password) ? ""
      : "Password must be at least 8 characters and contain a digit.",
    "confirm-error": confirm === password ? "" : "Passwords do not match.",
  };
  Object.entries(errors).forEach(([id, message]) => show(id, message));
  const ok = Object.values(errors).every((message) => !message);
  show("success", ok ? "Account created for " + email : "");
});
JS
