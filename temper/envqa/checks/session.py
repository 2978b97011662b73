"""One episode's environment opened on the warm pool, with the time split the benchmark reports:
sandbox start-up (acquire, incl. any template switch, and release) vs task work (everything else)."""

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from temper.envs.env import Environment
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.suite import Suite
from temper.envs.task import Task


@dataclass
class Clock:
    startup_s: float = 0.0
    work_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"startup_s": round(self.startup_s, 4), "work_s": round(self.work_s, 4)}


@asynccontextmanager
async def opened(suite: Suite, task: Task, pool: Any, clock: Clock) -> AsyncIterator[Environment]:
    """`suite.make_env` reset and ready (the agent phase begins); closed on exit."""
    env = suite.make_env(task, pool)
    t0 = time.perf_counter()
    if isinstance(env, SandboxEnv) and env.sandboxed:
        # Acquire here rather than in reset() so start-up is timed apart from the task's setup.
        env.sandbox = await env.provider.acquire(env.template, env.sandbox_limits, env.image)
        t1 = time.perf_counter()
        clock.startup_s += t1 - t0
        t0 = t1
        try:
            await env.setup()
        except BaseException:
            await env.close()
            raise
    await env.reset()
    try:
        yield env
    finally:
        t1 = time.perf_counter()
        clock.work_s += t1 - t0
        await env.close()
        clock.startup_s += time.perf_counter() - t1
