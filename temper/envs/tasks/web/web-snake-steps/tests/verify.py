"""Drive the snake by clicks and key presses (no timers: the same steps give the same game), read its state
after each step, look at the colours drawn, and score each rule of the instruction, one reward component each."""

import webcheck

STATE = """() => { const b = document.getElementById('board'), t = id => document.getElementById(id)?.textContent.trim();
  return [b?.getAttribute('data-snake')?.trim(), b?.getAttribute('data-food')?.trim(), t('score'), t('length'),
          t('status')]; }"""
BOARD = """() => { const b = document.getElementById('board'); if (!b) return null; const r = b.getBoundingClientRect(),
  s = getComputedStyle(b); return {x: r.left, y: r.top, w: r.width, h: r.height,
  edges: ['border-top-width', 'border-left-width', 'padding-top', 'padding-left'].map(p => parseFloat(s.getPropertyValue(p)))}; }"""
KEYS = {"U": "ArrowUp", "D": "ArrowDown", "L": "ArrowLeft", "R": "ArrowRight", "s": "s"}
HEAD, BODY, FOOD, BACKGROUND = (230, 57, 70), (42, 157, 143), (244, 162, 97), (38, 70, 83)


def state(snake: str, food: str, score: int, status: str = "Playing") -> list:
    return [snake, food, f"Score: {score}", f"Length: {len(snake.split())}", status]


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)

    def play(moves: str) -> list:
        """B clicks the Step button, s presses the key s, U D L R the arrow keys; the state after them."""
        for m in moves:
            if m == "B":
                webcheck.click(page, "#step")  # no button: the state after it says so
            else:
                page.keyboard.press(KEYS[m])
        return page.evaluate(STATE)

    board = page.evaluate(BOARD)
    button = page.locator("#step")
    c.score("board", board is not None and board["w"] == 240 and board["h"] == 240 and board["edges"] == [0] * 4
            and board["x"] >= 0 and board["y"] >= 0 and board["x"] + 240 <= 1000 and board["y"] + 240 <= 700
            and play("") == state("4,5 3,5 2,5", "7,5", 0)
            and button.count() == 1 and button.inner_text().strip() == "Step")
    c.score("steps", play("B") == state("5,5 4,5 3,5", "7,5", 0) and play("s") == state("6,5 5,5 4,5", "7,5", 0))
    reverse = play("Ls")
    up = play("Us")
    eaten = [reverse, play("ss"), play("Ls")]
    left = play("ssss")
    c.score("turns", reverse[0] == "7,5 6,5 5,5 4,5" and up == state("7,4 7,5 6,5 5,5", "7,2", 1)
            and eaten[2] == state("6,2 7,2 7,3 7,4 7,5", "2,2", 2))
    c.score("eat_grow", eaten[:2] == [state("7,5 6,5 5,5 4,5", "7,2", 1), state("7,2 7,3 7,4 7,5 6,5", "2,2", 2)]
            and left == state("2,2 3,2 4,2 5,2 6,2 7,2", "10,10", 3))
    top = play("Uss")
    shot = c.screenshot(page)
    if board is not None and top[0] == "2,0 2,1 2,2 3,2 4,2 5,2":
        at = lambda x, y: shot.getpixel((int(board["x"]) + 20 * x + 10, int(board["y"]) + 20 * y + 10))  # noqa: E731
        c.score("drawing", webcheck.near(at(2, 0), HEAD) and all(webcheck.near(at(x, y), BODY) for x, y in
                                                               ((2, 1), (2, 2), (4, 2), (5, 2)))
                and webcheck.near(at(10, 10), FOOD) and all(webcheck.near(at(x, y), BACKGROUND) for x, y in
                                                          ((0, 0), (3, 0), (7, 5), (11, 11), (6, 9))))
    over = state("2,0 2,1 2,2 3,2 4,2 5,2", "10,10", 3, "Game over")
    c.score("wall_over", top == state("2,0 2,1 2,2 3,2 4,2 5,2", "10,10", 3) and play("s") == over
            and play("RsBDs") == over)

    page = c.open("index.html", width=1000, height=700)
    before, over = play("sssUsssLsDs"), state("6,3 6,2 7,2 7,3 7,4", "2,2", 2, "Game over")
    c.score("self_over", before == state("6,3 6,2 7,2 7,3 7,4", "2,2", 2) and play("Rs") == over and play("Us") == over)


webcheck.run(["board", "steps", "turns", "eat_grow", "drawing", "wall_over", "self_over", "no_console_errors"], check)
