#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Lights Out</title>
<style>
  body { font-family: sans-serif; margin: 24px; }
  #board { display: grid; grid-template-columns: repeat(5, 60px); grid-auto-rows: 60px; gap: 4px; }
  .cell { border: 0; border-radius: 6px; background: #333333; cursor: pointer; }
  .cell[data-on="1"] { background: #ffcc00; }
  #moves, #status { font-size: 18px; }
</style></head>
<body>
  <h1>Lights Out</h1>
  <div id="board"></div>
  <p id="moves">Moves: 0</p>
  <p id="status"></p>
  <script src="lights.js"></script>
</body>
</html>
HTML
cat > /app/lights.js <<'JS'
const START = ["11001", "10111", "01111", "00110", "00111"];
const N = 5;
const board = document.getElementById("board");
const movesText = document.getElementById("moves");
const status = document.getElementById("status");
const lights = START.map((row) => [...row].map((ch) => ch === "1"));
const cells = [];
let moves = 0;

function render() {
  for (let r = 0; r < N; r++) {
    for (let c = 0; c < N; c++) cells[r][c].dataset.on = lights[r][c] ? "1" : "0";
  }
  movesText.textContent = "Moves: " + moves;
  status.textContent = lights.every((row) => row.every((on) => !on)) ? "Solved" : "";
}

function press(r, c) {
  for (const [dr, dc] of [[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]]) {
    const rr = r + dr, cc = c + dc;
    if (rr >= 0 && rr < N && cc >= 0 && cc < N) lights[rr][cc] = !lights[rr][cc];
  }
  moves += 1;
  render();
}

for (let r = 0; r < N; r++) {
  cells.push([]);
  for (let c = 0; c < N; c++) {
    const cell = document.createElement("button");
    cell.type = "button";
    cell.className = "cell";
    cell.id = `cell-${r}-${c}`;
    cell.setAttribute("aria-label", `row ${r + 1}, column ${c + 1}`);
    cell.addEventListener("click", () => press(r, c));
    board.append(cell);
    cells[r].push(cell);
  }
}
render();
JS
