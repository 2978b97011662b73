"""The web suite: pages the agent builds (HTML, CSS, JS) in the task's browser image, verified by rendering
them in a real headless Chromium inside the sandbox (docs/envs.md, "Web tasks").

Its tasks are terminal task folders (so `terminal:path=...`, envqa and external agents take them as they are);
this suite is their shipped set under its own name and domain.
"""

from pathlib import Path
from typing import Any

from temper.envs.registry import register_suite
from temper.envs.suites.terminal import TerminalEnv, TerminalSuite
from temper.envs.task import Task

SHIPPED_WEB = Path(__file__).resolve().parent.parent / "tasks" / "web"


class WebSuite(TerminalSuite):
    name = "web"
    domain = "web"

    def __init__(self, path: str = "", images: str = "on") -> None:
        super().__init__(path or str(SHIPPED_WEB), images)

    def make_env(self, task: Task, pool: Any = None) -> TerminalEnv:
        """A terminal task's environment, with the `render` tool: the agent opens its own page in the image's
        Chromium before it submits (plan, execute, verify, refine)."""
        env = super().make_env(task, pool)
        env.tools = (*(t for t in env.tools if t != "submit"), "render", "submit")
        return env


register_suite("web")(WebSuite)
