"""Solve the puzzle by clicking (after a click undone by a second one), read the board after every click, and
score each rule of the instruction, one reward component each."""

import webcheck

START = ["11001", "10111", "01111", "00110", "00111"]
ON, OFF = (255, 204, 0), (51, 51, 51)
CELLS = """[...Array(25).keys()].map(i => { const e = document.getElementById(`cell-${Math.floor(i / 5)}-${i % 5}`);
  if (!e) return null; const r = e.getBoundingClientRect();
  return {x: r.left, y: r.top, w: r.width, h: r.height, on: e.getAttribute('data-on'),
          bg: getComputedStyle(e).backgroundColor}; })"""
TEXT = "id => document.getElementById(id)?.textContent.trim() ?? null"


def press(lights: list[str], r: int, c: int) -> list[str]:
    """The board after a click on (r, c), by the rules (each click is judged from the board before it)."""
    grid = [list(row) for row in lights]
    for dr, dc in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= r + dr < 5 and 0 <= c + dc < 5:
            grid[r + dr][c + dc] = "0" if grid[r + dr][c + dc] == "1" else "1"
    return ["".join(row) for row in grid]


def grid_ok(cells: list) -> bool:
    if len(cells) != 25 or None in cells or not webcheck.apart(cells):
        return False
    rows = [cells[r * 5:r * 5 + 5] for r in range(5)]
    return (all(b["w"] >= 40 and b["h"] >= 40 and b["x"] + b["w"] <= 1000 and b["y"] + b["h"] <= 700 for b in cells)
            and all(abs(b["y"] - row[0]["y"]) <= 2 for row in rows for b in row)
            and all(abs(rows[r][k]["x"] - rows[0][k]["x"]) <= 2 for r in range(5) for k in range(5))
            and all(row[k]["x"] < row[k + 1]["x"] for row in rows for k in range(4))
            and all(rows[r][0]["y"] < rows[r + 1][0]["y"] for r in range(4)))


def coloured(cells: list, lights: list[str]) -> bool:
    """Each cell's computed background is its light's colour."""
    return len(cells) == 25 and None not in cells and all(
        webcheck.rgb(b["bg"]) == (ON if lights[i // 5][i % 5] == "1" else OFF) for i, b in enumerate(cells))


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)

    def state() -> tuple:
        cells = page.evaluate(CELLS)
        board = ["".join(str(b and b["on"]) for b in cells[r * 5:r * 5 + 5]) for r in range(5)]
        return board, page.evaluate(TEXT, "moves"), page.evaluate(TEXT, "status")

    cells = page.evaluate(CELLS)
    c.score("grid", grid_ok(cells))
    start = state()
    c.score("start_pattern", start[0] == START)
    shot = c.screenshot(page)
    c.score("colours", coloured(cells, START) and all(webcheck.near(
        shot.getpixel((int(b["x"] + b["w"] / 2), int(b["y"] + b["h"] / 2))), ON if START[i // 5][i % 5] == "1" else OFF)
        for i, b in enumerate(cells)) and c.got["grid"])

    board, seen, moves, statuses = start[0], {}, [start[1]], [start[2]]
    for name, (r, col) in [("toggle", (3, 1)), ("toggle", (3, 1)), ("toggle", (2, 2)),
                           ("edges", (0, 0)), ("edges", (1, 4)), ("edges", (4, 3))]:
        webcheck.click(page, f"#cell-{r}-{col}")  # a missing cell: the state after it says so
        before, (board, count, status) = board, state()
        valid = len(before) == 5 and all(len(row) == 5 and set(row) <= {"0", "1"} for row in before)
        seen[name] = seen.get(name, True) and valid and board == press(before, r, col)
        moves.append(count)
        statuses.append(status)
        if (r, col) == (2, 2):
            c.score("colours", c.got["colours"] and coloured(page.evaluate(CELLS), board))
    c.score("toggle", seen["toggle"])
    c.score("edges", seen["edges"])
    c.score("moves", moves == [f"Moves: {n}" for n in range(7)])
    c.score("solved", start[0] == START and board == ["00000"] * 5 and statuses == [""] * 6 + ["Solved"])

webcheck.run(["grid", "start_pattern", "colours", "toggle", "edges", "moves", "solved", "no_console_errors"], check)
