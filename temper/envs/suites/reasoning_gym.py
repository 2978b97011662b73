"""`reasoning_gym:task=NAME,n=N,seed=S[,python=true]`: procedural tasks from the reasoning-gym
package (countdown, basic_arithmetic, gsm_symbolic, chain_sum, needle_haystack, ... any of its
generators), scored by the generator's own `score_answer`. With `python=true` the agent also
gets the python tool (run in a sandbox) to compute its answer.
"""

from collections.abc import Callable
from typing import Any

from temper.envs.answer import ANSWER_FORMAT, extract_answer
from temper.envs.env import SingleTurnEnv
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.suite import ListSuite
from temper.envs.task import Task
from temper.errors import TemperError

_DOMAINS = {"arithmetic": "math", "algebra": "math", "algorithmic": "algorithmic", "games": "games",
            "logic": "logic", "graphs": "graphs", "cognition": "cognition", "code": "code"}


class ReasoningGymEnv(SingleTurnEnv, SandboxEnv):
    """Single-turn; with `python`, a sandbox backs the python tool during the episode."""

    background = "Solve the problem. Think step by step, then commit to one final answer."

    def __init__(self, task: Task, score: Callable[[str | None, dict[str, Any]], float],
                 python: bool = False, pool: Any = None) -> None:
        SandboxEnv.__init__(self, task, pool, sandboxed=python)
        self.score = score
        self.tools = ("python", "submit") if python else ()

    def validate(self, answer: str) -> str | None:
        return None if extract_answer(answer) is not None else "No final answer found. " + ANSWER_FORMAT

    async def verify(self, answer: str) -> Reward:
        extracted = extract_answer(answer)
        correct = float(self.score(extracted, self.task.payload["entry"]))
        return Reward(value=correct, components={"correctness": correct, "format": float(extracted is not None)},
                      info={"extracted": extracted})

    async def run_oracle(self) -> Reward:
        return (await self.step(f"<answer>{self.task.oracle}</answer>")).reward or Reward()


class ReasoningGymSuite(ListSuite):
    name = "reasoning_gym"

    def __init__(self, task: str, n: int = 100, seed: int = 0, python: bool = False) -> None:
        super().__init__()
        import reasoning_gym  # heavy (sympy, matplotlib): only when the suite is used

        try:
            self.dataset = reasoning_gym.create_dataset(task, size=n, seed=seed)
        except (ValueError, KeyError) as exc:
            raise TemperError(f"reasoning_gym: no task {task!r} ({exc})") from None
        self.task_name, self.python = task, python
        self.needs_sandbox = python
        module = type(self.dataset).__module__.split(".")
        self.domain = _DOMAINS.get(module[1] if len(module) > 1 else "", "reasoning")

    def build(self) -> list[Task]:
        tasks = []
        for entry in self.dataset:
            meta = entry.get("metadata", {})
            difficulty = meta.get("difficulty")
            tasks.append(Task.make(
                self.name, self.domain, f"{entry['question']}\n\n{ANSWER_FORMAT}", {"entry": entry},
                tags=("reasoning_gym", self.task_name),
                difficulty=difficulty if isinstance(difficulty, str | int | float) else None,
                oracle=str(entry["answer"]),
            ))
        return tasks

    def make_env(self, task: Task, pool: Any = None) -> ReasoningGymEnv:
        return ReasoningGymEnv(task, self.dataset.score_answer, self.python, pool)


register_suite("reasoning_gym")(ReasoningGymSuite)
