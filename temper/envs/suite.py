"""A suite: a named, deterministic collection of tasks and the environments that run them.

Every suite exposes its reference solutions the same way (`run_oracle`), and a do-nothing
baseline (`run_noop`), so evaluation (`--oracle`) and env QA need no per-suite code.
"""

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from temper.envs.env import Environment
from temper.envs.reward import Reward
from temper.envs.task import Task
from temper.errors import TemperError


class Suite(ABC):
    name: str = ""
    spec: str = ""  # the spec it was built from, set by the registry
    needs_sandbox: bool = False  # whether its environments need a sandbox pool

    @abstractmethod
    def tasks(self) -> list[Task]:
        """All tasks, in a stable order."""

    @abstractmethod
    def make_env(self, task: Task, pool: Any = None) -> Environment:
        """A fresh environment for one episode of `task` (sandboxes come from `pool`)."""

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks())

    def __len__(self) -> int:
        return len(self.tasks())

    def get(self, task_id: str) -> Task:
        for t in self.tasks():
            if t.id == task_id:
                return t
        raise TemperError(f"suite {self.spec or self.name}: no task with id {task_id}")

    async def run_oracle(self, task: Task, pool: Any = None) -> Reward:
        """Score the task's reference solution with the suite's own verifier."""
        async with self.make_env(task, pool) as env:
            await env.reset()
            return await env.run_oracle()

    async def run_noop(self, task: Task, pool: Any = None) -> Reward:
        """Score an agent that does nothing; a sound task gives it no reward."""
        async with self.make_env(task, pool) as env:
            await env.reset()
            return await env.run_noop()


    async def run_oracles(self, tasks: list[Task] | None = None, pool: Any = None,
                          concurrency: int = 4) -> list[Reward]:
        """`run_oracle` over many tasks (default: all), a few at a time; suites may batch it."""
        sem = asyncio.Semaphore(concurrency)

        async def one(task: Task) -> Reward:
            async with sem:
                return await self.run_oracle(task, pool)

        return list(await asyncio.gather(*(one(t) for t in (self.tasks() if tasks is None else tasks))))


class ListSuite(Suite):
    """A suite whose tasks are built once, eagerly, by `build()`."""

    def __init__(self) -> None:
        self._tasks: list[Task] | None = None

    @abstractmethod
    def build(self) -> list[Task]: ...

    def tasks(self) -> list[Task]:
        if self._tasks is None:
            self._tasks = self.build()
        return self._tasks
