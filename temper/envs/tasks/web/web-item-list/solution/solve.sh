#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Shopping list</title></head>
<body>
  <form id="add-form">
    <label for="new-item">New item</label>
    <input id="new-item" type="text" autocomplete="off">
    <button type="submit">Add</button>
  </form>
  <ul id="items"></ul>
  <p id="count">Items: 0</p>
  <script src="list.js"></script>
</body>
</html>
HTML
cat > /app/list.js <<'JS'
const form = document.getElementById("add-form");
const input = document.getElementById("new-item");
const list = document.getElementById("items");
const count = document.getElementById("count");

function update() {
  count.textContent = "Items: " + list.children.length;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  const item = document.createElement("li");
  const label = document.createElement("span");
  label.textContent = text;
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "Remove";
  remove.addEventListener("click", () => { item.remove(); update(); });
  item.append(label, remove);
  list.append(item);
  input.value = "";
  update();
});
JS
