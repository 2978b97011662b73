"""Clean vs noisy: a suite and its `noisy:` variant side by side, paired per task, with the drop
and its CI in summary.json and the report."""

import asyncio
from pathlib import Path

from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.solvers import AnswerSolver

CLEAN = "longctx:task=niah,length=200,n=20,haystack=generated"
NOISY = f"noisy:suite=({CLEAN}),rate=0.1"


def test_noisy_drop_is_paired_per_task(tmp_path: Path) -> None:
    def answer(task, sample):  # right on every clean task; on the noisy variant of half of them
        wrong = "noisy" in task.tags and int(task.payload["expected"][0]) % 2 == 0
        return f"<answer>{'?' if wrong else task.oracle}</answer>"

    run = asyncio.run(evaluate(AnswerSolver(answer), [CLEAN, NOISY], EvalConfig.from_recipe(dict(progress=False)),
        tmp_path))
    records = run.records
    assert {r.base_id for r in records[CLEAN]} == {r.base_id for r in records[NOISY]}
    assert not {r.task_id for r in records[CLEAN]} & {r.task_id for r in records[NOISY]}  # prompts differ
    [pair] = run.summary["robustness"]
    expected_drop = sum(r.reward == 0.0 for r in records[NOISY]) / 20
    assert pair["clean"] == CLEAN and pair["noisy"] == NOISY and pair["paired"] == 20
    assert pair["clean_mean"] == 1.0 and abs(pair["drop"] - expected_drop) < 1e-9 and 0 < expected_drop < 1
    assert 0 < pair["ci_low"] <= pair["drop"] <= pair["ci_high"]
    assert "Robustness: clean vs noisy" in (tmp_path / "report.md").read_text()
