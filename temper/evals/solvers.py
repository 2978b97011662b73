"""Solvers: what answers an item. The model (engine + agent loop, in model_solver.py), the
suite's reference solutions (`--oracle`), a do-nothing baseline, or any answer function.

A solver returns an `Outcome`; the runner turns it into a record. Solvers that can score many
items in one go (the oracle: HumanEval checks 164 programs in one sandbox exec) define
`solve_batch` and say for which suites with `batches(suite)`; the runner then hands them a chunk
of items at a time.
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from temper.envs.reward import Reward
from temper.envs.suite import Suite
from temper.envs.task import Task


@dataclass
class Outcome:
    reward: Reward
    output: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    turns: int = 0
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Solver(Protocol):
    name: str

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome: ...


class OracleSolver:
    """The task's reference solution, scored by the suite's own verifier."""

    name = "oracle"

    def __init__(self, pool: Any = None) -> None:
        self.pool = pool  # where its episodes get sandboxes (make_env's `pool`; None: fresh ones, defaults)

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        return Outcome(await suite.run_oracle(task, self.pool), output=task.oracle or "")

    def batches(self, suite: Suite) -> bool:
        """Batch only where the suite scores many oracles at once (HumanEval): elsewhere one item's
        failure would fail its whole batch, and per-item calls run just as concurrently."""
        return type(suite).run_oracles is not Suite.run_oracles

    async def solve_batch(self, suite: Suite, items: list[tuple[Task, int]]) -> list[Outcome]:
        tasks = [t for t, _ in items]
        rewards = await suite.run_oracles(tasks, pool=self.pool)
        return [Outcome(r, output=t.oracle or "") for t, r in zip(tasks, rewards, strict=True)]


class NoopSolver:
    """An agent that does nothing: a sound suite gives it no reward (the deliberately wrong solver)."""

    name = "noop"

    def __init__(self, pool: Any = None) -> None:
        self.pool = pool

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        return Outcome(await suite.run_noop(task, self.pool))


class AnswerSolver:
    """Answers from a function `fn(task, sample) -> str` (may be async), scored through the env."""

    def __init__(self, fn: Callable[[Task, int], Any], name: str = "answers") -> None:
        self.fn, self.name = fn, name

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        answer = self.fn(task, sample)
        if inspect.isawaitable(answer):
            answer = await answer
        async with suite.make_env(task) as env:
            await env.reset()
            result = await env.step(answer)
        return Outcome(result.reward or Reward(), output=answer, turns=1)
