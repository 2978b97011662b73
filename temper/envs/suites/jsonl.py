"""`jsonl:path=FILE,reward=pkg.module:fn`: a user's dataset scored by a user's Python function.

Each line is a JSON object with at least `prompt`; optional `id`, `domain`, `tags`,
`difficulty`, `answer` (the reference answer, used as the oracle) and any other fields. The
reward function is called as `fn(completion, example)` (`example` is the line as a dict),
may be async, and returns a number, a dict of components (key `reward` = the value) or a Reward.
"""

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temper.envs.env import SingleTurnEnv
from temper.envs.registry import load_object, register_suite
from temper.envs.reward import Reward
from temper.envs.suite import ListSuite
from temper.envs.task import Task
from temper.errors import TemperError


class JsonlEnv(SingleTurnEnv):
    reward_range = None  # the user's reward function sets its own scale (still a finite number)

    def __init__(self, task: Task, fn: Callable[..., Any]) -> None:
        super().__init__(task)
        self.fn = fn

    async def verify(self, answer: str) -> Reward:
        out = self.fn(answer, self.task.payload["example"])
        if inspect.isawaitable(out):
            out = await out
        return Reward.coerce(out)


class JsonlSuite(ListSuite):
    name = "jsonl"

    def __init__(self, path: str, reward: str, domain: str = "custom") -> None:
        super().__init__()
        self.path, self.domain = Path(path), domain
        fn = load_object(reward, "reward function")
        if not callable(fn):
            raise TemperError(f"reward function {reward!r} is not callable")
        self.fn: Callable[..., Any] = fn

    def build(self) -> list[Task]:
        if not self.path.is_file():
            raise TemperError(f"jsonl suite: {self.path} does not exist")
        tasks = []
        for n, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                ex = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TemperError(f"{self.path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(ex, dict) or not isinstance(ex.get("prompt"), str):
                raise TemperError(f"{self.path}:{n}: each line must be an object with a string 'prompt'")
            answer = ex.get("answer")
            task = Task.make(
                self.name, ex.get("domain", self.domain), ex["prompt"], {"example": ex},
                tags=tuple(ex.get("tags", ())), difficulty=ex.get("difficulty"),
                oracle=None if answer is None else str(answer),
            )
            tasks.append(task)
        return tasks

    def make_env(self, task: Task, pool: Any = None) -> JsonlEnv:
        return JsonlEnv(task, self.fn)


register_suite("jsonl")(JsonlSuite)
