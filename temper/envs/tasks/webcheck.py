"""What every web task's verifier shares (it runs inside the task's sandbox, never in temper's interpreter).

The web suite uploads this file beside a task's tests/ into /tests; a task's verify.py names its reward
components and one function that scores them on pages opened in a real headless Chromium:

    import webcheck

    def check(c: webcheck.Checks) -> None:
        page = c.open("index.html", width=1000, height=700)
        c.score("title", page.title() == "Sales")
        c.screenshot(page)

    webcheck.run(["title", "no_console_errors"], check)

The site (/app) is served on the sandbox's loopback by this process; rendering is made deterministic (no
animations or transitions, reduced motion, device scale 1, sRGB, the image's own fonts). A check that raises
keeps what was scored before it; `no_console_errors`, when named, is scored last from every page opened. The
components go to /logs/verifier/reward.json (the reward is their mean), the last screenshot taken to
/logs/verifier/screenshot.png (where the check took none, the last page opened, as it was when it stopped);
then `run` ends the process, its browser killed.
"""

import contextlib
import functools
import http.server
import io
import json
import os
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

OUT = Path("/logs/verifier")
SITE = "/app"
TIMEOUT_MS = 5000  # a missing element is a failed check, not a hung verifier
FREEZE = ("*, *::before, *::after { animation-delay: -1s !important; animation-duration: 0s !important; "
          "animation-iteration-count: 1 !important; transition: none !important; caret-color: transparent; }")
BOXES = """sel => [...document.querySelectorAll(sel)].map(e => { const r = e.getBoundingClientRect();
  return {x: r.left, y: r.top, w: r.width, h: r.height, text: e.innerText === undefined ? e.textContent : e.innerText}; })"""


class _Site(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/favicon.ico" and not Path(self.directory, "favicon.ico").is_file():
            self.send_response(204)  # the browser asks for it by itself: no console error for the page
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


class Checks:
    """Pages on the served site, and the components scored so far."""

    def __init__(self, browser: Any, base_url: str, components: list[str]) -> None:
        self.browser, self.base_url = browser, base_url
        self.got = dict.fromkeys(components, False)
        self.errors: list[str] = []  # console errors and uncaught exceptions, of every page opened
        self.pages: list[Page] = []
        self.shot = False  # a screenshot was kept

    def open(self, path: str = "index.html", width: int = 1000, height: int = 700) -> Page:
        """A new page at `width` x `height` CSS px, loaded, fonts ready, animations frozen."""
        context = self.browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1,
                                           reduced_motion="reduce", color_scheme="light")
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.pages.append(page)
        page.goto(f"{self.base_url}/{path}", wait_until="load")
        page.add_style_tag(content=FREEZE)
        page.evaluate("document.fonts.ready.then(() => true)")
        return page

    def wait_for(self, page: Page, condition: str, timeout_ms: int = TIMEOUT_MS) -> bool:
        """Wait until the JavaScript expression `condition` holds on `page` (e.g. what a script draws after
        load); False if it never does: the checks after it then say what is missing."""
        try:
            page.wait_for_function(condition, timeout=timeout_ms)
        except Exception:
            return False
        return True

    def score(self, name: str, ok: Any) -> bool:
        if name not in self.got:
            raise KeyError(f"{name!r} is not one of the components {list(self.got)}")
        self.got[name] = bool(ok)
        return self.got[name]

    def screenshot(self, page: Page) -> Any:
        """The page as rendered (a PIL image), also kept as the episode's screenshot."""
        from PIL import Image

        png = page.screenshot(animations="disabled", caret="hide")
        (OUT / "screenshot.png").write_bytes(png)
        self.shot = True
        return Image.open(io.BytesIO(png)).convert("RGB")


def click(page: Page, selector: str) -> bool:
    """Click `selector` as a player would: a missing, hidden or disabled element takes no click (the state after it
    says so, and nothing waits on it); an enabled one is clicked, given the time a loaded machine needs (a 1 s
    limit skipped clicks on a busy machine and made an oracle flaky). Whether it clicked."""
    el = page.locator(selector)
    try:
        if el.count() != 1 or not el.is_visible() or not el.is_enabled():
            return False
        el.click(timeout=TIMEOUT_MS)
        return True
    except Exception:  # covered by another element, detached meanwhile: no click, as for a player
        return False


def boxes(page: Page, selector: str) -> list[dict]:
    """Each element matching `selector`: its box in CSS px (x, y, w, h) and its text."""
    return page.evaluate(BOXES, selector)


def style(page: Page, selector: str, prop: str) -> str:
    """The computed value of CSS property `prop` on the first element matching `selector` ("" if none)."""
    return page.evaluate("([s, p]) => { const e = document.querySelector(s); "
                         "return e ? getComputedStyle(e).getPropertyValue(p) : ''; }", [selector, prop])


def apart(items: list[dict]) -> bool:
    """No two boxes overlap (a shared edge is fine)."""
    return all(a["x"] + a["w"] <= b["x"] + 0.5 or b["x"] + b["w"] <= a["x"] + 0.5 or
               a["y"] + a["h"] <= b["y"] + 0.5 or b["y"] + b["h"] <= a["y"] + 0.5
               for i, a in enumerate(items) for b in items[i + 1:])


def rgb(css: str) -> tuple[int, int, int]:
    """`rgb(1, 2, 3)` or `rgba(1, 2, 3, 1)` (a computed colour) as a tuple."""
    inside = css[css.index("(") + 1:css.index(")")].replace("/", " ").replace(",", " ").split()
    return int(float(inside[0])), int(float(inside[1])), int(float(inside[2]))


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (1 to 21)."""
    def luminance(c: tuple[int, int, int]) -> float:
        lin = [v / 255 / 12.92 if v / 255 <= 0.04045 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def near(pixel: tuple[int, ...], colour: tuple[int, int, int], tolerance: int = 24) -> bool:
    return all(abs(p - c) <= tolerance for p, c in zip(pixel[:3], colour, strict=True))


def run(components: list[str], check: Callable[[Checks], None], site: str = SITE) -> None:
    """Serve `site`, run `check` in a headless Chromium, write the reward, and end the process. The browser
    and playwright's driver are killed, not shut down: their orderly exit took half a second of every
    verification, and nothing of theirs is needed once the reward is written."""
    OUT.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Site, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    checks = Checks(None, f"http://127.0.0.1:{server.server_address[1]}", components)
    try:
        checks.browser = sync_playwright().start().chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--no-sandbox", "--force-color-profile=srgb", "--font-render-hinting=none", "--disable-gpu",
                  "--disable-lcd-text", "--hide-scrollbars"])
        try:
            check(checks)
        finally:
            if not checks.shot and checks.pages:  # a check failed before its screenshot: keep the page as it was
                with contextlib.suppress(Exception):
                    checks.screenshot(checks.pages[-1])
    except Exception:
        traceback.print_exc()  # what was scored before it stands
    if "no_console_errors" in checks.got:
        checks.got["no_console_errors"] = not checks.errors
    if checks.errors:
        print("console errors:", *checks.errors[:10], sep="\n  ")
    scores = {k: float(v) for k, v in checks.got.items()}
    (OUT / "reward.json").write_text(json.dumps({**scores, "reward": sum(scores.values()) / len(scores)}))
    print(json.dumps(scores), flush=True)
    _kill_browser()
    os._exit(0)


def _kill_browser(wait_s: float = 2.0) -> None:
    """SIGKILL every process this one started (playwright's driver) and every Chromium process of the sandbox
    (the browser starts a session of its own, and its crash handlers detach from it altogether: after the
    reset before verification, any Chromium here is ours), then wait until each is gone or a zombie."""
    children: dict[int, list[int]] = {}
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int(Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
                if os.path.basename(os.readlink(f"/proc/{name}/exe")).startswith("chrom"):
                    found.append(int(name))
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(_running(pid) for pid in found):
        time.sleep(0.005)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
