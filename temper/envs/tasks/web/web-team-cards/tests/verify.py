"""Render /app in a headless Chromium and score each requirement of the instruction (one reward component
each; the reward is their mean). The site is served by this process on a port of its own (a server the agent
left running cannot stand in for it); the screenshot at 1200 px is kept in /logs/verifier/screenshot.png."""

import functools
import http.server
import json
import shutil
import threading
import traceback
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path("/logs/verifier")
PEOPLE = [("Ada Lovelace", "Engineer"), ("Grace Hopper", "Admiral"), ("Alan Turing", "Scientist")]
CHECKS = ["heading", "cards", "wide_row", "narrow_column", "borders", "no_console_errors"]
BOXES = """[...document.querySelectorAll('.card')].map(c => { const r = c.getBoundingClientRect();
  return {x: r.left, y: r.top, w: r.width, h: r.height, border: parseFloat(getComputedStyle(c).borderTopWidth),
          name: c.querySelector('h2')?.innerText.trim(), role: c.querySelector('p')?.innerText.trim()}; })"""


class Site(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/favicon.ico" and not Path(self.directory, "favicon.ico").is_file():
            self.send_response(204)  # the browser asks for it by itself: no console error for the page
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


def serve(root: str) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Site, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def apart(boxes: list[dict]) -> bool:
    """No two boxes overlap (a shared edge is fine)."""
    return all(a["x"] + a["w"] <= b["x"] + 0.5 or b["x"] + b["w"] <= a["x"] + 0.5 or
               a["y"] + a["h"] <= b["y"] + 0.5 or b["y"] + b["h"] <= a["y"] + 0.5
               for i, a in enumerate(boxes) for b in boxes[i + 1:])


def check(page, url: str, errors: list[str], got: dict[str, bool]) -> None:
    """Fills `got` as it goes: a step that fails (an element missing) keeps what was scored before it."""
    page.set_viewport_size({"width": 1200, "height": 800})
    page.goto(url, wait_until="load")
    got["heading"] = page.locator("h1").count() == 1 and page.locator("h1").inner_text().strip() == "Our team"
    wide = page.evaluate(BOXES)
    got["cards"] = [(b["name"], b["role"]) for b in wide] == PEOPLE
    got["wide_row"] = (len(wide) == 3 and apart(wide) and all(abs(b["y"] - wide[0]["y"]) <= 2 for b in wide)
                       and wide[0]["x"] < wide[1]["x"] < wide[2]["x"])
    got["borders"] = len(wide) == 3 and all(b["border"] >= 1 for b in wide)
    page.screenshot(path=str(OUT / "screenshot.png"))
    page.set_viewport_size({"width": 400, "height": 800})
    narrow = page.evaluate(BOXES)
    got["narrow_column"] = (len(narrow) == 3 and apart(narrow) and all(b["w"] >= 300 for b in narrow)
                            and all(abs(b["x"] - narrow[0]["x"]) <= 2 for b in narrow)
                            and narrow[0]["y"] < narrow[1]["y"] < narrow[2]["y"])
    got["no_console_errors"] = not errors


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    got = dict.fromkeys(CHECKS, False)
    server = serve("/app")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(device_scale_factor=1, reduced_motion="reduce")
            page.set_default_timeout(5000)  # a missing element is a failed check, not a hung verifier
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            check(page, f"http://127.0.0.1:{server.server_address[1]}/index.html", errors, got)
            browser.close()
    except Exception:
        traceback.print_exc()
    finally:
        server.shutdown()
    components = {k: float(v) for k, v in got.items()}
    (OUT / "reward.json").write_text(json.dumps({**components, "reward": sum(components.values()) / len(components)}))
    print(json.dumps(components))


main()
