"""An environment with a sandbox: acquired at reset, released at close, called without blocking."""

from pathlib import Path
from typing import Any

from temper.envs.env import Environment, Observation, TaskLimits
from temper.envs.sandboxes import SandboxProvider, as_provider
from temper.envs.task import Task
from temper.sandbox import ExecResult, ImageRoot, Limits
from temper.sandbox.aio import call


class SandboxEnv(Environment):
    def __init__(self, task: Task, pool: Any = None, limits: TaskLimits | None = None,
                 template: Path | None = None, sandbox_limits: Limits | None = None, sandboxed: bool = True,
                 image: ImageRoot | None = None) -> None:
        super().__init__(task, limits)
        self.provider: SandboxProvider = as_provider(pool)
        self.template, self.sandbox_limits, self.image = template, sandbox_limits, image
        self.sandboxed = sandboxed  # False: the env runs without one (e.g. no tool needs it)

    async def reset(self) -> Observation:
        if self.sandbox is None and self.sandboxed:
            self.sandbox = await self.provider.acquire(self.template, self.sandbox_limits, self.image)
            await self.setup()
        return Observation(self.task.prompt)

    async def setup(self) -> None:
        """Prepare the workspace before the agent starts (nothing by default)."""

    async def exec(self, cmd: str | list[str], *, stdin: str | bytes | None = None, timeout: float | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """`user`: an image sandbox's user for this command (default: the image's USER)."""
        if user is None:
            return await call(self.sandbox.exec, cmd, stdin=stdin, timeout=timeout, cwd=cwd, env=env)
        return await call(self.sandbox.exec, cmd, stdin=stdin, timeout=timeout, cwd=cwd, env=env, user=user)

    async def close(self) -> None:
        sb, self.sandbox = self.sandbox, None
        if sb is not None:
            await self.provider.release(sb)
