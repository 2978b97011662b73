"""Open the chart in a headless Chromium over data the agent has not seen (this checker rewrites sales.csv
first: the page must read it) and score each requirement of the instruction (one reward component each; the
reward is their mean). The site is served by this process on a port of its own; the screenshot is kept in
/logs/verifier/screenshot.png."""

import contextlib
import functools
import http.server
import itertools
import json
import shutil
import threading
import traceback
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path("/logs/verifier")
DATA = [("North", 80), ("South", 260), ("East", 40), ("West", 150), ("Central", 200), ("Islands", 15)]
CHECKS = ["svg", "bars", "proportional", "baseline", "no_overlap", "labels", "no_console_errors"]
BARS = """[...document.querySelectorAll('svg rect.bar')].map(b => { const r = b.getBoundingClientRect();
  return {region: b.getAttribute('data-region'), x: r.left, y: r.top, w: r.width, h: r.height}; })"""
LABELS = """[...document.querySelectorAll('svg text')].map(t => { const r = t.getBoundingClientRect();
  return {text: t.textContent.trim(), cx: r.left + r.width / 2, y: r.top}; })"""


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


def check(page, url: str, errors: list[str], got: dict[str, bool]) -> None:
    """Fills `got` as it goes: a step that fails (an element missing) keeps what was scored before it."""
    page.goto(url, wait_until="load")
    with contextlib.suppress(Exception):  # no bars drawn: the checks below say what is missing
        page.wait_for_function("document.querySelectorAll('svg rect.bar').length > 0", timeout=5000)
    got["svg"] = page.locator("svg").count() >= 1
    bars = page.evaluate(BARS)
    got["bars"] = [b["region"] for b in bars] == [r for r, _ in DATA] and all(b["w"] > 0 for b in bars)
    if got["bars"]:
        top = max(bars, key=lambda b: b["h"])
        peak = max(v for _, v in DATA)
        got["proportional"] = top["h"] >= 200 and all(
            abs(b["h"] / top["h"] - v / peak) <= 0.02 for b, (_, v) in zip(bars, DATA, strict=True))
        got["baseline"] = max(b["y"] + b["h"] for b in bars) - min(b["y"] + b["h"] for b in bars) <= 1.5
        got["no_overlap"] = all(a["x"] + a["w"] <= b["x"] + 0.5 for a, b in itertools.pairwise(bars))
        labels = page.evaluate(LABELS)
        got["labels"] = all(any(t["text"] == b["region"] and b["x"] <= t["cx"] <= b["x"] + b["w"]
                                and t["y"] >= b["y"] + b["h"] - 2 for t in labels) for b in bars)
    page.screenshot(path=str(OUT / "screenshot.png"))
    got["no_console_errors"] = not errors


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    got = dict.fromkeys(CHECKS, False)
    Path("/app/sales.csv").write_text("region,sales\n" + "".join(f"{r},{v}\n" for r, v in DATA))
    server = serve("/app")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1000, "height": 700}, device_scale_factor=1)
            page.set_default_timeout(5000)  # a missing element is a failed check, not a hung verifier
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            try:
                check(page, f"http://127.0.0.1:{server.server_address[1]}/index.html", errors, got)
            finally:
                browser.close()
    except Exception:
        traceback.print_exc()
    finally:
        server.shutdown()
    components = {k: float(v) for k, v in got.items()}
    (OUT / "reward.json").write_text(json.dumps({**components, "reward": sum(components.values()) / len(components)}))
    print(json.dumps(components))


main()
