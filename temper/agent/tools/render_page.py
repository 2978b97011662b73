"""The program the `render` tool runs inside a web task's sandbox (its image has python3, playwright and
Chromium): serve the working folder on a loopback port of its own, open a page at a viewport width in headless
Chromium, and print what a text-only model needs to see of it: title, console errors, and an outline of the
visible elements with their boxes. The screenshot is saved for the model (or a person) to look at.

Standard library and playwright only: it runs there, never imports temper. argv: page, width, screenshot path.
"""

import functools
import http.server
import os
import shutil
import sys
import threading

from playwright.sync_api import sync_playwright

OUTLINE = """(limit) => { const out = [];
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    const r = el.getBoundingClientRect(), st = getComputedStyle(el);
    if (!r.width || !r.height || st.visibility === 'hidden' || st.display === 'none') continue;
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join(' ').trim();
    const id = el.id ? '#' + el.id : '', cls = [...el.classList].map(c => '.' + c).join('');
    out.push(`${el.tagName.toLowerCase()}${id}${cls}${own ? ' "' + own.slice(0, 60) + '"' : ''} ` +
             `at (${Math.round(r.left)},${Math.round(r.top)}) ${Math.round(r.width)}x${Math.round(r.height)}`);
    if (out.length >= limit) break; }
  return out; }"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main(page_path: str, width: int, shot: str) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=os.getcwd()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": width, "height": 800}, device_scale_factor=1)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(f"http://127.0.0.1:{server.server_address[1]}/{page_path.lstrip('/')}",
                                 wait_until="load", timeout=15000)
            outline = page.evaluate(OUTLINE, 80)
            page.screenshot(path=shot)
            height = page.evaluate("document.body ? document.body.scrollHeight : 0")
            print(f"{page_path} at {width} px wide: HTTP {response.status if response else '?'}, "
                  f"title {page.title()!r}, page height {height} px")
            browser.close()
    finally:
        server.shutdown()
    print("console errors:" + ("".join(f"\n  {e[:200]}" for e in errors[:10]) if errors else " none"))
    print(f"visible elements ({len(outline)}{', the first 80' if len(outline) >= 80 else ''}):")
    print("\n".join(f"  {line}" for line in outline))
    print(f"screenshot: {shot}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
