"""An environment with a sandbox: acquired at reset, released at close, called without blocking."""

from pathlib import Path
from typing import Any

from temper.envs.env import Environment, Observation, TaskLimits
from temper.envs.sandboxes import SandboxProvider, as_provider
from temper.envs.task import Task
from temper.sandbox import ExecResult, Limits
from temper.sandbox.aio import call


class SandboxEnv(Environment):
    def __init__(self, task: Task, pool: Any = None, limits: TaskLimits | None = None,
                 template: Path | None = None, sandbox_limits: Limits | None = None, sandboxed: bool = True) -> None:
        super().__init__(task, limits)
        self.provider: SandboxProvider = as_provider(pool)
        self.template, self.sandbox_limits = template, sandbox_limits
        self.sandboxed = sandboxed  # False: the env runs without one (e.g. no tool needs it)

    async def reset(self) -> Observation:
        if self.sandbox is None and self.sandboxed:
            self.sandbox = await self.provider.acquire(self.template, self.sandbox_limits)
            await self.setup()
        return Observation(self.task.prompt)

    async def setup(self) -> None:
        """Prepare the workspace before the agent starts (nothing by default)."""

    async def exec(self, cmd: str | list[str], *, stdin: str | bytes | None = None, timeout: float | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None) -> ExecResult:
        return await call(self.sandbox.exec, cmd, stdin=stdin, timeout=timeout, cwd=cwd, env=env)

    async def close(self) -> None:
        sb, self.sandbox = self.sandbox, None
        if sb is not None:
            await self.provider.release(sb)
