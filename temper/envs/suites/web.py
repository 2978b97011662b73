"""The web suite: pages the agent builds (HTML, CSS, JS, SVG, assets made with external tools) in the task's
browser image, verified by rendering them in a real headless Chromium inside the sandbox (docs/envs.md,
"Web and visual tasks").

Its tasks are terminal task folders whose tests/verify.py uses the shared checker `webcheck` (uploaded beside
it into /tests). The render is judged in a container the agent never touched: its site (the WORKDIR's files)
is copied out, the sandbox reset to the image as built (its Chromium, Python, playwright) and the site copied
back before tests/test.sh runs. The final screenshot is kept with the episode, and the external tools the task
expects ([metadata] tools) are looked for in what the agent ran (the sandbox's audit log).
"""

import base64
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.sandboxes import broken_by_agent
from temper.envs.suites.terminal import TerminalEnv, TerminalSuite
from temper.sandbox.aio import call
from temper.trajectory import SCREENSHOT, SCREENSHOT_BYTES

SHIPPED_WEB = Path(__file__).resolve().parent.parent / "tasks" / "web"
WEBCHECK = SHIPPED_WEB.parent / "webcheck.py"
SITE_BYTES = 64 << 20  # the most of an agent's site that is carried over to the verifier
SITE_FILES = 5000


class WebEnv(TerminalEnv):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        # the agent opens its own page in the image's Chromium before it submits: plan, execute, verify, refine
        self.tools = (*(t for t in self.tools if t != "submit"), "render", "submit")
        self._staged: Path | None = None
        self._audit_from = 0

    async def setup(self) -> None:
        await super().setup()
        audit = self._audit_log()
        self._audit_from = audit.stat().st_size if audit is not None and audit.exists() else 0

    def tests_folder(self) -> Path:
        """tests/ with webcheck.py beside it, staged once per environment."""
        if self._staged is None:
            self._staged = Path(tempfile.mkdtemp(prefix="temper-web-tests-"))
            shutil.copytree(self.folder.path / "tests", self._staged, dirs_exist_ok=True)
            shutil.copy2(WEBCHECK, self._staged / "webcheck.py")
            self._staged.chmod(0o755)
        return self._staged

    async def verify(self) -> Reward:
        used = self.tools_used()
        site = Path(tempfile.mkdtemp(prefix="temper-web-site-"))
        try:
            taken = await self._take_site(site)
            if taken is not None:
                return taken
            await call(self.sandbox.reset)  # the image as built: nothing the agent changed outside its site
            await call(self.sandbox.upload, site, self.workdir)
            reward = await super().verify()
        finally:
            shutil.rmtree(site, ignore_errors=True)
        if reward.failure is None:
            reward.info.update(used)
            shot = await self._screenshot()
            if shot:
                reward.info[SCREENSHOT] = shot
        return reward

    async def _take_site(self, dest: Path) -> Reward | None:
        """Copy the WORKDIR's regular files (at most SITE_FILES, SITE_BYTES) to `dest`; a Reward if it cannot."""
        listing = await call(self.sandbox.list_files, self.workdir, True)
        files = [e for e in listing if e.type == "file"]
        if listing.truncated or len(files) > SITE_FILES or sum(e.size for e in files) > SITE_BYTES:
            return broken_by_agent(f"the site in {self.workdir} is over {SITE_FILES} files or "
                                   f"{SITE_BYTES >> 20} MiB: not verified")
        for e in files:
            target = dest / e.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(await call(self.sandbox.read_file, f"{self.workdir}/{e.path}", SITE_BYTES))
        return None

    async def _screenshot(self) -> str | None:
        """/logs/verifier/screenshot.png as base64, to be kept with the episode; None if there is none."""
        try:
            png = await call(self.sandbox.read_file, "/logs/verifier/screenshot.png", SCREENSHOT_BYTES + 1)
        except Exception:  # the verifier took none (a page that never loaded): nothing to keep
            return None
        return base64.b64encode(png).decode() if png.startswith(b"\x89PNG") and len(png) <= SCREENSHOT_BYTES else None

    def _audit_log(self) -> Path | None:
        audit = getattr(self.sandbox, "audit", None)  # a remote sandbox's log is on its own node
        return getattr(audit, "path", None)

    def tools_used(self) -> dict[str, Any]:
        """Which of the task's expected tools ([metadata] tools) the agent ran: searched for as a word in the
        commands, shell keys and stdin (a program's source) of this sandbox's audit records since setup."""
        expected = self.folder.tools
        info: dict[str, Any] = {"category": self.folder.category}
        if not expected:
            return info
        info["tools_expected"] = expected
        audit = self._audit_log()
        if audit is None or not audit.exists():
            return info  # not known: no rate is counted for this episode
        text = []
        with audit.open("rb") as f:
            f.seek(self._audit_from)
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("sandbox") == self.sandbox.id and rec.get("op") in ("exec", "shell"):
                    text += [" ".join(rec.get("argv") or []), rec.get("keys") or "", rec.get("stdin_head") or ""]
        ran = "\n".join(text)
        info["tools_used"] = [t for t in expected if re.search(rf"(?<![\w.-]){re.escape(t)}(?![\w-])", ran)]
        info["expected_tool_used"] = bool(info["tools_used"])
        return info

    async def close(self) -> None:
        await super().close()
        if self._staged is not None:
            shutil.rmtree(self._staged, ignore_errors=True)


class WebSuite(TerminalSuite):
    name = "web"
    domain = "web"
    env_class = WebEnv

    def __init__(self, path: str = "", images: str = "on") -> None:
        super().__init__(path or str(SHIPPED_WEB), images)


register_suite("web")(WebSuite)
