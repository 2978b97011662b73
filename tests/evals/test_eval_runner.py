"""The runner's task window (start, limit), the priority gate held around every item, bounded
concurrency, and a solver exception recorded as an infrastructure failure of its item only."""

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

from temper.envs import parse_spec
from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.solvers import AnswerSolver

SPEC = "longctx:task=niah,length=100,n=12,haystack=generated"


def test_window_gate_concurrency_and_failures(tmp_path: Path) -> None:
    tasks = parse_spec(SPEC).tasks()
    in_flight, peak, gate_calls, held, inside = 0, 0, [], 0, []

    async def answer(task, sample):
        nonlocal in_flight, peak
        inside.append(held > in_flight)  # this item, like every one in flight, holds the gate
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        if task.id == tasks[6].id:
            raise RuntimeError("the harness broke")
        return f"<answer>{task.oracle}</answer>"

    @asynccontextmanager
    async def gate():  # what the orchestrator passes to run evaluation below training (Pipeline.low_priority)
        nonlocal held
        gate_calls.append(1)
        held += 1
        try:
            yield
        finally:
            held -= 1

    cfg = EvalConfig.from_recipe(dict(progress=False, start=4, limit=5, samples=2, concurrency=3))
    run = asyncio.run(evaluate(AnswerSolver(answer), [SPEC], cfg, tmp_path, gate=gate))
    records = run.records[SPEC]
    assert {r.task_id for r in records} == {t.id for t in tasks[4:9]} and len(records) == 10
    assert len(gate_calls) == 10 and peak == 3 and all(inside) and held == 0
    failed = [r for r in records if not r.ok]
    assert {r.task_id for r in failed} == {tasks[6].id} and failed[0].failure == "worker_error"
    assert "the harness broke" in failed[0].error
    s = run.summary["suites"][SPEC]
    assert (s["n"], s["mean_reward"], s["infra_failures"]) == (4, 1.0, 2)  # failures are not wrong answers
    assert run.summary["run"]["start"] == 4 and run.summary["run"]["limit"] == 5
