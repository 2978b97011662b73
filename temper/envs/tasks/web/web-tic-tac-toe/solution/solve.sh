#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Tic-tac-toe</title>
<style>
  body { font-family: sans-serif; margin: 24px; }
  #board { display: grid; grid-template-columns: repeat(3, 80px); grid-template-rows: repeat(3, 80px); gap: 6px; }
  #board button { font-size: 40px; font-weight: bold; background: #f4f4f4; border: 2px solid #345; }
  #status { font-size: 20px; }
</style></head>
<body>
  <h1>Tic-tac-toe</h1>
  <div id="board"></div>
  <p id="status">X to move</p>
  <button id="restart" type="button">Restart</button>
  <script src="game.js"></script>
</body>
</html>
HTML
cat > /app/game.js <<'JS'
const LINES = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];
const board = document.getElementById("board");
const status = document.getElementById("status");
const cells = [];
let marks, player, over;

function winner() {
  for (const [a, b, c] of LINES) {
    if (marks[a] && marks[a] === marks[b] && marks[a] === marks[c]) return marks[a];
  }
  return null;
}

function render() {
  cells.forEach((cell, i) => { cell.textContent = marks[i]; });
  const won = winner();
  if (won) status.textContent = won + " wins";
  else if (marks.every((m) => m)) status.textContent = "Draw";
  else status.textContent = player + " to move";
}

function play(i) {
  if (over || marks[i]) return;
  marks[i] = player;
  player = player === "X" ? "O" : "X";
  over = Boolean(winner()) || marks.every((m) => m);
  render();
}

function restart() {
  marks = Array(9).fill("");
  player = "X";
  over = false;
  render();
}

for (let i = 0; i < 9; i++) {
  const cell = document.createElement("button");
  cell.type = "button";
  cell.id = "cell-" + i;
  cell.addEventListener("click", () => play(i));
  board.append(cell);
  cells.push(cell);
}
document.getElementById("restart").addEventListener("click", restart);
restart();
JS
