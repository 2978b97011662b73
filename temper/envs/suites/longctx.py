"""`longctx:task=niah|multi_niah|vartrack|freq|all,length=TOKENS,depth=D,n=N,seed=S,haystack=essays|generated`

Synthetic long-context tasks over real prose or generated text. Scored in-process by recall:
the fraction of expected items (numbers, variable names, words) present in the final answer.
"""

import random
import re
from typing import Any

from temper.envs.answer import ANSWER_FORMAT, extract_answer
from temper.envs.env import SingleTurnEnv
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.suite import ListSuite
from temper.envs.suites import longctx_tasks as gen
from temper.envs.task import Task
from temper.errors import TemperError

KINDS = ("niah", "multi_niah", "vartrack", "freq")


def recall_reward(answer: str, expected: list[str]) -> Reward:
    """The fraction of `expected` items among the words of the answer (its <answer> part when it has one)."""
    extracted = extract_answer(answer)
    found = set(re.findall(r"[\w-]+", extracted if extracted is not None else answer))
    recall = sum(e in found for e in expected) / len(expected)
    return Reward(value=recall, components={"recall": recall, "format": float(extracted is not None)})


class LongCtxEnv(SingleTurnEnv):
    background = "Read the long text carefully and answer the question at its end."

    async def verify(self, answer: str) -> Reward:
        return recall_reward(answer, self.task.payload["expected"])

    async def run_oracle(self) -> Reward:
        return (await self.step(f"<answer>{self.task.oracle}</answer>")).reward or Reward()


class LongCtxSuite(ListSuite):
    name = "longctx"
    domain = "long_context"

    def __init__(self, task: str = "all", length: int = 2000, depth: float = 0.5, n: int = 20, seed: int = 0,
                 haystack: str = "essays", needles: int = 4, hops: int = 4, top: int = 3) -> None:
        super().__init__()
        if task != "all" and task not in KINDS:
            raise TemperError(f"longctx: task={task!r} must be one of {', '.join(KINDS)} or all")
        if not 0.0 <= depth <= 1.0 or length < 50:
            raise TemperError(f"longctx: need 0 <= depth <= 1 and length >= 50 (got depth={depth}, length={length})")
        self.kind, self.length, self.depth, self.n, self.seed = task, length, depth, n, seed
        self.haystack, self.needles, self.hops, self.top = haystack, needles, hops, top

    def _one(self, kind: str, i: int) -> Task:
        rng = random.Random(f"{self.seed}:{kind}:{i}:{self.length}:{self.depth}:{self.haystack}")
        if kind == "niah":
            prompt, expected = gen.niah(rng, self.length, self.depth, self.haystack)
        elif kind == "multi_niah":
            prompt, expected = gen.multi_niah(rng, self.length, self.depth, self.haystack, self.needles)
        elif kind == "vartrack":
            prompt, expected = gen.vartrack(rng, self.length, self.depth, self.haystack, self.hops)
        else:
            prompt, expected = gen.freq(rng, self.length, self.top)
        return Task.make(
            self.name, self.domain, f"{prompt}\n{ANSWER_FORMAT}", {"expected": expected, "kind": kind},
            tags=("longctx", kind, f"len{self.length}", f"depth{self.depth:g}"), difficulty=self.length,
            oracle=", ".join(expected),
        )

    def build(self) -> list[Task]:
        kinds = KINDS if self.kind == "all" else (self.kind,)
        return [self._one(kinds[i % len(kinds)], i) for i in range(self.n)]

    def make_env(self, task: Task, pool: Any = None) -> LongCtxEnv:
        return LongCtxEnv(task)


register_suite("longctx")(LongCtxSuite)
