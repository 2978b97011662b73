"""Small verifiable suites: the default recipe's, the tool-use recipe's and the tests':

- `arithmetic:op=add,digits=2,n=N,seed=S[,sandbox=true]`: "What is 37 + 48?" as a chat prompt,
  scored on correctness with a lenient extraction (the number after the last `=`, else the last
  number), the default recipe's suite: SmolLM2-135M-Instruct passes ~25-30% of two-digit sums.
- `calc:op=mul,digits=3,n=N,seed=S`: "What is 347 * 829?" with a `calculator` tool that evaluates
  in the episode's sandbox: products of 3-digit numbers are beyond a small model's head, so the
  reward comes from calling the tool well (the tool-use recipe, examples/train/tool-use.yaml);
- `toy:n=N,seed=S,digits=D[,sandbox=true]`: "say 7" for a tiny random model with a tiny
  vocabulary (tests and the async benchmark: reward neither 0 nor 1 from the start).

With `sandbox=true` the verifier runs in a sandbox (a Python one-liner compares the answers),
so sandbox faults reach the episode like they would in a terminal task.
"""

import random
from typing import Any, ClassVar

from temper.envs.answer import lenient_number
from temper.envs.env import Observation, StepResult, timed_verify
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.suite import ListSuite
from temper.envs.task import Task
from temper.errors import TemperError

_CHECK = "import sys; print(int(sys.argv[1].strip() == sys.argv[2].strip()))"


class AnswerEnv(SandboxEnv):
    """Single turn: the reply is scored against `payload['answer']`, in a sandbox when asked."""

    def __init__(self, task: Task, extract: Any, sandboxed: bool, pool: Any = None) -> None:
        super().__init__(task, pool)
        self.extract, self.sandboxed = extract, sandboxed

    async def reset(self) -> Observation:  # a sandbox only when the verifier needs one
        if self.sandboxed:
            return await super().reset()
        return Observation(self.task.prompt)

    async def verify(self, answer: str) -> Reward:
        got = self.extract(answer)
        want = str(self.task.payload["answer"])
        if got is None:
            correct = 0.0
        elif self.sandboxed:
            res = await self.exec(["python3", "-c", _CHECK, got, want], timeout=30)
            if res.exit_code != 0:
                raise RuntimeError(f"verifier exited {res.exit_code}: {res.stderr[-200:]!r}")
            correct = float(res.stdout.strip() == b"1")
        else:
            correct = float(got.strip() == want)
        return Reward(value=correct, components={"correctness": correct, "format": float(got is not None)},
                      info={"extracted": got})

    async def step(self, action: str) -> StepResult:
        return StepResult(reward=await timed_verify(self.verify(action), self.limits.verifier_timeout_s), done=True)


class _AnswerSuite(ListSuite):
    sandbox = False

    def make_env(self, task: Task, pool: Any = None) -> AnswerEnv:
        return AnswerEnv(task, self.extract, self.sandbox, pool)

    @staticmethod
    def extract(text: str) -> str | None:
        return lenient_number(text)


@register_suite("arithmetic")
class ArithmeticSuite(_AnswerSuite):
    name = "arithmetic"
    OPS: ClassVar[dict[str, tuple[str, Any]]] = {
        "add": ("+", lambda a, b: a + b), "sub": ("-", lambda a, b: a - b), "mul": ("*", lambda a, b: a * b)}

    def __init__(self, op: str = "add", digits: int = 2, n: int = 1000, seed: int = 0, sandbox: bool = False,
                 domain: str = "math") -> None:
        super().__init__()
        if op not in self.OPS:
            raise TemperError(f"arithmetic: op={op!r} is not one of {', '.join(self.OPS)}")
        if not 1 <= digits <= 6:
            raise TemperError(f"arithmetic: digits={digits} must be in 1..6")
        self.op, self.digits, self.n, self.seed, self.domain = op, digits, n, seed, domain
        self.sandbox = self.needs_sandbox = sandbox

    def build(self) -> list[Task]:
        rng = random.Random(f"arithmetic-{self.op}-{self.digits}-{self.seed}")
        lo, hi = 10 ** (self.digits - 1) if self.digits > 1 else 0, 10**self.digits - 1
        sym, fn = self.OPS[self.op]
        tasks = []
        for _ in range(self.n):
            a, b = rng.randint(lo, hi), rng.randint(lo, hi)
            if self.op == "sub" and b > a:
                a, b = b, a
            prompt = f"What is {a} {sym} {b}? Reply with only the number."
            tasks.append(Task.make(self.name, self.domain, prompt, {"answer": fn(a, b)},
                                   tags=("arithmetic", self.op), difficulty=self.digits, oracle=str(fn(a, b))))
        return tasks


class CalculatorEnv(AnswerEnv):
    tools = ("calculator",)


@register_suite("calc")
class CalculatorSuite(ArithmeticSuite):
    name = "calc"

    def __init__(self, op: str = "mul", digits: int = 3, n: int = 1000, seed: int = 0, domain: str = "math") -> None:
        super().__init__(op, digits, n, seed, sandbox=True, domain=domain)

    def build(self) -> list[Task]:
        return [Task.make(self.name, self.domain, t.prompt.replace(
            "Reply with only the number.", "Use the calculator tool, then reply with only the number."),
            t.payload, tags=("calculator", self.op), difficulty=self.digits, oracle=t.oracle)
            for t in super().build()]

    def make_env(self, task: Task, pool: Any = None) -> AnswerEnv:
        return CalculatorEnv(task, self.extract, True, pool)


@register_suite("toy")
class ToySuite(_AnswerSuite):
    """'say D': the answer is the digit shown. A tiny random model emits it ~1/16 of the time at first."""

    name = "toy"

    def __init__(self, n: int = 64, seed: int = 0, digits: int = 10, sandbox: bool = False,
                 domain: str = "toy") -> None:
        super().__init__()
        self.n, self.seed, self.digits, self.domain = n, seed, digits, domain
        self.sandbox = self.needs_sandbox = sandbox

    def build(self) -> list[Task]:
        rng = random.Random(f"toy-{self.seed}")
        out = []
        for i in range(self.n):
            d = rng.randrange(self.digits)
            out.append(Task.make(self.name, self.domain, f"say {d}", {"answer": d, "i": i, "seed": self.seed},
                                 tags=("toy",), oracle=str(d)))
        return out

    @staticmethod
    def extract(text: str) -> str | None:
        words = text.split()
        return words[0] if words and words[0].isdigit() else None


