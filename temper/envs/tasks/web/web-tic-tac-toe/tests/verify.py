"""Play three games by clicking (X wins, O wins, a draw) and score each rule of the instruction, one reward
component each."""

import webcheck

CELLS = """[...Array(9).keys()].map(i => { const e = document.getElementById('cell-' + i); if (!e) return null;
  const r = e.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height, text: e.textContent.trim()}; })"""
STATUS = "document.getElementById('status')?.textContent.trim() ?? null"
E = ""


def grid_ok(cells: list) -> bool:
    if len(cells) != 9 or None in cells or not webcheck.apart(cells):
        return False
    rows = [cells[r * 3:r * 3 + 3] for r in range(3)]
    return (all(b["w"] >= 40 and b["h"] >= 40 for b in cells)
            and all(abs(b["y"] - row[0]["y"]) <= 2 and row[0]["x"] < row[1]["x"] < row[2]["x"] for row in rows for b in row)
            and all(abs(rows[r][k]["x"] - rows[0][k]["x"]) <= 2 for r in range(3) for k in range(3))
            and rows[0][0]["y"] < rows[1][0]["y"] < rows[2][0]["y"])


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)

    def state():
        cells = page.evaluate(CELLS)
        return [b and b["text"] for b in cells], page.evaluate(STATUS)

    def play(*moves: int):
        for i in moves:
            webcheck.click(page, f"#cell-{i}")
        return state()

    c.score("grid", grid_ok(page.evaluate(CELLS)) and state() == ([E] * 9, "X to move"))
    first = play(0) == (["X", E, E, E, E, E, E, E, E], "O to move")
    c.score("turns", first and play(4) == (["X", E, E, E, "O", E, E, E, E], "X to move"))
    taken = play(4) == (["X", E, E, E, "O", E, E, E, E], "X to move") and play(0)[0][:5] == ["X", E, E, E, "O"]
    c.score("taken_ignored", taken and play(1) == (["X", "X", E, E, "O", E, E, E, E], "O to move"))
    won = c.score("x_wins", play(3, 2) == (["X", "X", "X", "O", "O", E, E, E, E], "X wins"))
    c.score("stops_after_win", won and play(5) == (["X", "X", "X", "O", "O", E, E, E, E], "X wins"))
    webcheck.click(page, "#restart")
    button = page.locator("#restart")
    c.score("restart", button.count() == 1 and button.inner_text().strip() == "Restart"
            and state() == ([E] * 9, "X to move") and play(8) == ([E] * 8 + ["X"], "O to move"))

    page = c.open("index.html", width=1000, height=700)
    c.score("o_wins", play(0, 2, 1, 4, 3, 6) == (["X", "X", "O", "X", "O", E, "O", E, E], "O wins"))

    page = c.open("index.html", width=1000, height=700)
    going = play(0, 1, 2, 4, 3, 5, 7, 6) == (["X", "O", "X", "X", "O", "O", "O", "X", E], "X to move")
    c.score("draw", going and play(8) == (["X", "O", "X", "X", "O", "O", "O", "X", "X"], "Draw"))
    c.screenshot(page)


webcheck.run(["grid", "turns", "taken_ignored", "x_wins", "stops_after_win", "restart", "o_wins", "draw",
              "no_console_errors"], check)
