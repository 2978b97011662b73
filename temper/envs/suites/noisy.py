"""`noisy:suite=S,rate=R[,seed=N,kinds=typo+ocr+log+space]`: suite S with corrupted inputs.

Only what the agent sees (the prompt) is corrupted, reproducibly per task and seed; the
verifier, payload and oracle are those of S, so scores are comparable with the clean suite.
Nest a spec with arguments in parentheses: `noisy:suite=(reasoning_gym:task=countdown),rate=0.05`.
"""

import random
from typing import Any

from temper.envs.corrupt import KINDS, corrupt
from temper.envs.env import Environment
from temper.envs.registry import parse_spec, register_suite
from temper.envs.suite import ListSuite
from temper.envs.task import Task
from temper.errors import TemperError


class NoisySuite(ListSuite):
    name = "noisy"

    def __init__(self, suite: str, rate: float = 0.05, seed: int = 0, kinds: str = "+".join(KINDS)) -> None:
        super().__init__()
        if not 0.0 <= rate <= 1.0:
            raise TemperError(f"noisy: rate={rate} must be in [0, 1]")
        self.kinds = tuple(k for k in kinds.split("+") if k)
        if bad := [k for k in self.kinds if k not in KINDS]:
            raise TemperError(f"noisy: unknown kinds {bad} (known: {'+'.join(KINDS)})")
        self.inner, self.rate, self.seed = parse_spec(suite), rate, seed
        self.needs_sandbox = self.inner.needs_sandbox

    def build(self) -> list[Task]:
        out = []
        for t in self.inner.tasks():
            rng = random.Random(f"{self.seed}:{t.id}")
            out.append(t.with_prompt(corrupt(t.prompt, self.rate, rng, self.kinds),
                                     tags=(*t.tags, "noisy"), suite=f"noisy/{t.suite}"))
        return out

    def make_env(self, task: Task, pool: Any = None) -> Environment:
        return self.inner.make_env(task, pool)


register_suite("noisy")(NoisySuite)
