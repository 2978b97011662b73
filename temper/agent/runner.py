"""Many episodes at once: n per task, a bounded number in flight, each with its own environment."""

import asyncio
from typing import Any

from temper.agent.episode import EpisodeResult
from temper.agent.loop import AgentLoop
from temper.envs.env import EpisodeLimits
from temper.envs.suite import Suite
from temper.envs.task import Task


async def run_episodes(loop: AgentLoop, suite: Suite, tasks: list[Task], n: int = 1, pool: Any = None,
                       concurrency: int = 8, limits: EpisodeLimits | None = None) -> list[EpisodeResult]:
    """Results in task order, n per task; the n episodes of a task share a group id (for GRPO-style
    advantages). Failures are in the results (`result.failure`), never raised."""
    sem = asyncio.Semaphore(concurrency)

    async def one(task: Task, k: int) -> EpisodeResult:
        async with sem:
            return await loop.run(suite.make_env(task, pool, limits), group_id=task.id, episode_id=f"{k}")

    return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(n))))
