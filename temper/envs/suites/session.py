"""`session:task=recall|track|all,turns=T,record=TOKENS,n=N,seed=S,haystack=essays|generated`

A long multi-turn session whose history outgrows a small context: after a short opening (the task, which
every compacted window keeps), the user shows `turns` records, one per message (each about `record` tokens of
haystack prose with one fact somewhere inside), the agent replies to each, and a last message asks about them.
What the agent can answer depends on what its context manager kept of the early records, so this is the family
for measuring context management (raw history against compaction; benchmarks/context_bench.py,
docs/evals.md#context-management-measured).

- recall: every record gives one key's access code; the question asks for one of them. Which record holds
  the asked fact cycles over the tasks, so early and late facts are asked equally often.
- track: a chain of VAR assignments, one link per record, and a decoy chain (multi-hop, as RULER's variable
  tracking): which variables end up holding the value.

Scored by recall, longctx's rule: the fraction of expected items in the final answer.
"""

import itertools
import random
from typing import Any

from temper.envs.answer import ANSWER_FORMAT
from temper.envs.env import Environment, Observation, StepResult, timed_verify
from temper.envs.haystack import insert, sentences
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.suite import ListSuite
from temper.envs.suites.longctx import recall_reward
from temper.envs.suites.longctx_tasks import WORDS, number, variable
from temper.envs.task import Task
from temper.errors import TemperError

KINDS = ("recall", "track")


class SessionEnv(Environment):
    background = ("This is a long session: records arrive one per message. After each record, reply briefly "
                  "with the facts in it that you may need later. At the end you will be asked about them.")

    def __init__(self, task: Task) -> None:
        super().__init__(task)
        self.shown = 0  # records the agent has seen (then the question)

    def _message(self, i: int) -> str:
        records = self.task.payload["records"]
        if i < len(records):
            return f"Record {i + 1} of {len(records)}:\n{records[i]}"
        return f"That was the last record. {self.task.payload['question']}\n{ANSWER_FORMAT}"

    async def step(self, action: str) -> StepResult:
        if self.shown <= len(self.task.payload["records"]):  # a reply: the next record, then the question
            self.shown += 1
            return StepResult(Observation(self._message(self.shown - 1)))
        return StepResult(reward=await timed_verify(self.verify(action), self.limits.verifier_timeout_s), done=True)

    async def verify(self, answer: str) -> Reward:
        return recall_reward(answer, self.task.payload["expected"])

    async def run_oracle(self) -> Reward:
        return await self.verify(f"<answer>{self.task.oracle}</answer>")

    async def run_noop(self) -> Reward:
        return await self.verify("")


class SessionSuite(ListSuite):
    name = "session"
    domain = "long_horizon"

    def __init__(self, task: str = "all", turns: int = 10, record: int = 300, n: int = 20, seed: int = 0,
                 haystack: str = "essays") -> None:
        super().__init__()
        if task != "all" and task not in KINDS:
            raise TemperError(f"session: task={task!r} must be one of {', '.join(KINDS)} or all")
        if turns < 2 or record < 20 or n < 1:
            raise TemperError(f"session: need turns >= 2, record >= 20 and n >= 1 (got turns={turns}, "
                              f"record={record}, n={n})")
        self.kind, self.turns, self.record, self.n, self.seed, self.haystack = task, turns, record, n, seed, haystack

    def _records(self, rng: random.Random, facts: list[list[str]]) -> list[str]:
        """One record per entry of `facts`: haystack with those sentences at random depths."""
        return [insert(sentences(self.haystack, self.record, rng), [(rng.random(), f) for f in fs]) for fs in facts]

    def _one(self, kind: str, i: int) -> Task:
        """The kind's i-th task."""
        rng = random.Random(f"{self.seed}:{kind}:{i}:{self.turns}:{self.record}:{self.haystack}")
        if kind == "recall":
            keys = [f"{a}-{b}" for a, b in rng.sample(list(itertools.permutations(WORDS, 2)), self.turns)]
            codes = [number(rng) for _ in keys]
            at = i % self.turns  # the record that holds the asked fact
            records = self._records(rng, [[f"The access code for {k} is {c}."] for k, c in zip(keys, codes,
                                                                                              strict=True)])
            question, expected = f"What is the access code for {keys[at]}?", [codes[at]]
        else:
            value, decoy = str(rng.randrange(10_000, 100_000)), str(rng.randrange(10_000, 100_000))
            chain, other = [variable(rng) for _ in range(self.turns)], [variable(rng) for _ in range(2)]
            facts = [[f"VAR {chain[0]} = {value}."]] + [[f"VAR {b} = VAR {a}."] for a, b in itertools.pairwise(chain)]
            d0, d1 = sorted(rng.sample(range(self.turns), 2))
            facts[d0].append(f"VAR {other[0]} = {decoy}.")
            facts[d1].append(f"VAR {other[1]} = VAR {other[0]}.")
            records, at = self._records(rng, facts), 0
            question = (f"Following the VAR assignments in the records, which variables hold the value {value}? "
                        "List all of them.")
            expected = chain
        payload: dict[str, Any] = {"records": records, "question": question, "expected": expected, "kind": kind,
                                   "fact_in_record": at + 1}
        intro = (f"A session of {self.turns} records begins: they arrive one per message. Reply briefly to each; "
                 "at the end you will be asked about them. Reply 'ready' for the first record.")
        return Task.make(self.name, self.domain, intro, payload,
                         tags=("session", kind, f"turns{self.turns}", f"record{self.record}", f"fact{at + 1}"),
                         difficulty=self.turns * self.record, oracle=", ".join(expected))

    def build(self) -> list[Task]:
        kinds = KINDS if self.kind == "all" else (self.kind,)
        return [self._one(kinds[i % len(kinds)], i // len(kinds)) for i in range(self.n)]

    def make_env(self, task: Task, pool: Any = None) -> SessionEnv:
        return SessionEnv(task)


register_suite("session")(SessionSuite)
