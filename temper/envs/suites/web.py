"""The web suite: pages the agent builds (HTML, CSS, JS) in the task's browser image, verified by rendering
them in a real headless Chromium inside the sandbox (docs/envs.md, "Web tasks").

Its tasks are terminal task folders (so `terminal:path=...`, envqa and external agents take them as they are);
this suite is their shipped set under its own name and domain.
"""

from pathlib import Path

from temper.envs.registry import register_suite
from temper.envs.suites.terminal import TerminalSuite

SHIPPED_WEB = Path(__file__).resolve().parent.parent / "tasks" / "web"


class WebSuite(TerminalSuite):
    name = "web"
    domain = "web"

    def __init__(self, path: str = "", images: str = "on") -> None:
        super().__init__(path or str(SHIPPED_WEB), images)


register_suite("web")(WebSuite)
