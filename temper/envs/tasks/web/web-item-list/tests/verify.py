"""Use the page as a person would, in a headless Chromium: type, click, press Enter; score each requirement of
the instruction (one reward component each; the reward is their mean). The site is served by this process on a
port of its own; the screenshot after the interaction is kept in /logs/verifier/screenshot.png."""

import functools
import http.server
import json
import shutil
import threading
import traceback
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path("/logs/verifier")
CHECKS = ["labelled_input", "add", "clears_input", "blank_ignored", "enter_adds", "remove", "count",
          "no_console_errors"]
ITEMS = "[...document.querySelectorAll('#items > li')].map(li => li.firstElementChild?.tagName === 'SPAN' ? " \
        "li.firstElementChild.textContent : null)"


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
    items = lambda: page.evaluate(ITEMS)  # noqa: E731
    count = lambda: page.locator("#count").inner_text().strip() if page.locator("#count").count() else None  # noqa: E731
    field, add = page.get_by_label("New item", exact=True), page.get_by_role("button", name="Add", exact=True)
    got["labelled_input"] = field.count() == 1 and field.get_attribute("id") == "new-item"
    start = count() == "Items: 0" and items() == []
    field.fill("  milk  ")
    add.click()
    got["add"] = items() == ["milk"]
    got["clears_input"] = got["add"] and field.input_value() == ""
    field.fill("   ")
    add.click()
    got["blank_ignored"] = got["add"] and items() == ["milk"]
    field.fill("bread")
    field.press("Enter")
    got["enter_adds"] = items() == ["milk", "bread"]
    two = count() == "Items: 2"
    page.locator("#items > li").filter(has_text="milk").get_by_role("button", name="Remove").click()
    got["remove"] = items() == ["bread"]
    got["count"] = start and two and count() == "Items: 1"
    page.screenshot(path=str(OUT / "screenshot.png"))
    got["no_console_errors"] = not errors


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    got = dict.fromkeys(CHECKS, False)
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
