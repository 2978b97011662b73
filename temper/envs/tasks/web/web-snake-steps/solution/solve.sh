#!/bin/bash
set -e
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Snake, step by step</title>
<style>
  body { font-family: sans-serif; margin: 24px; }
  #board { display: block; width: 240px; height: 240px; margin-bottom: 12px; }
  .info span { margin-right: 16px; }
</style></head>
<body>
  <h1>Snake</h1>
  <canvas id="board" width="240" height="240"></canvas>
  <p class="info"><span id="score">Score: 0</span><span id="length">Length: 3</span><span id="status">Playing</span></p>
  <button id="step" type="button">Step</button>
  <script src="snake.js"></script>
</body>
</html>
HTML
cat > /app/snake.js <<'JS'
const N = 12, SIZE = 20;
const FOODS = [[7, 5], [7, 2], [2, 2], [10, 10]];
const DIRS = { ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] };
const COLOURS = { background: "#264653", head: "#e63946", body: "#2a9d8f", food: "#f4a261" };
const board = document.getElementById("board");
const ctx = board.getContext("2d");
let snake = [[4, 5], [3, 5], [2, 5]];
let dir = [1, 0], lastMove = [1, 0], foodIndex = 0, score = 0, over = false;

function cell(x, y, colour) {
  ctx.fillStyle = colour;
  ctx.fillRect(x * SIZE, y * SIZE, SIZE, SIZE);
}

function render() {
  const food = FOODS[foodIndex];
  ctx.fillStyle = COLOURS.background;
  ctx.fillRect(0, 0, N * SIZE, N * SIZE);
  if (food) cell(food[0], food[1], COLOURS.food);
  snake.forEach(([x, y], i) => cell(x, y, i === 0 ? COLOURS.head : COLOURS.body));
  board.dataset.snake = snake.map(([x, y]) => x + "," + y).join(" ");
  board.dataset.food = food ? food[0] + "," + food[1] : "";
  document.getElementById("score").textContent = "Score: " + score;
  document.getElementById("length").textContent = "Length: " + snake.length;
  document.getElementById("status").textContent = over ? "Game over" : "Playing";
}

function step() {
  if (over) return;
  const nx = snake[0][0] + dir[0], ny = snake[0][1] + dir[1];
  const food = FOODS[foodIndex];
  const eats = Boolean(food) && food[0] === nx && food[1] === ny;
  const body = eats ? snake : snake.slice(0, -1);
  if (nx < 0 || ny < 0 || nx >= N || ny >= N || body.some(([x, y]) => x === nx && y === ny)) {
    over = true;
  } else {
    snake = [[nx, ny], ...body];
    lastMove = dir;
    if (eats) { score += 1; foodIndex += 1; }
  }
  render();
}

document.addEventListener("keydown", (event) => {
  if (event.key === "s" || event.key === "S") { step(); return; }
  const d = DIRS[event.key];
  if (!d) return;
  event.preventDefault();
  if (over || (d[0] === -lastMove[0] && d[1] === -lastMove[1])) return;
  dir = d;
});
document.getElementById("step").addEventListener("click", step);
render();
JS
