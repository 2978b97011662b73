"""`temper compare`: a planted regression on one suite reads "mixed" and names it; paired per task
where the runs share tasks, unpaired otherwise; bad run folders fail with one line."""

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from temper.cli.main import app
from temper.evals.compare import compare_runs
from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.solvers import AnswerSolver

NIAH = "longctx:task=niah,length=200,n=30,haystack=generated"
FREQ = "longctx:task=freq,length=200,n=30"


def run(folder: Path, rates: dict[str, float], suites: list[str] | None = None) -> Path:
    """A run whose answers are right for the first `rate` share of each suite's tasks."""
    def answer(task, sample):
        kind = task.payload["kind"]
        index = order[kind].index(task.id)
        right = index < rates[kind] * len(order[kind])
        return f"<answer>{task.oracle if right else 'no idea'}</answer>"

    from temper.envs.registry import parse_spec

    order = {parse_spec(s).tasks()[0].payload["kind"]: [t.id for t in parse_spec(s).tasks()] for s in (NIAH, FREQ)}
    asyncio.run(evaluate(AnswerSolver(answer), suites or [NIAH, FREQ], EvalConfig.from_recipe(dict(progress=False)),
        folder))
    return folder


def test_planted_regression_on_one_suite_is_mixed(tmp_path: Path) -> None:
    a = run(tmp_path / "a", {"niah": 0.3, "freq": 0.6})
    b = run(tmp_path / "b", {"niah": 0.9, "freq": 0.1})  # niah improved, freq regressed
    cmp = compare_runs(a, b)
    assert cmp.verdict == f"mixed: regressed on {FREQ}" and cmp.regressed == [FREQ] and cmp.improved == [NIAH]
    e = cmp.suites[NIAH]
    assert e["method"] == "paired" and e["paired"] == 30 and abs(e["diff"] - 0.6) < 1e-9 and e["ci_low"] > 0
    assert cmp.suites[FREQ]["ci_high"] < 0 and "long_context" in e["domains"]

    result = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == f"verdict: mixed: regressed on {FREQ}"
    saved = json.loads((b / "compare" / "compare.json").read_text())
    assert saved["verdict"].startswith("mixed") and (b / "compare" / "compare.png").is_file()
    assert "Verdict: mixed" in (b / "compare" / "compare.html").read_text()

    assert compare_runs(a, run(tmp_path / "c", {"niah": 1.0, "freq": 0.9})).verdict == "improved everywhere"
    assert compare_runs(a, run(tmp_path / "d", {"niah": 0.0, "freq": 0.1})).verdict == "regressed"


def test_unmatched_tasks_are_compared_unpaired(tmp_path: Path) -> None:
    solver = AnswerSolver(lambda t, s: f"<answer>{t.oracle}</answer>")
    a, b = tmp_path / "a", tmp_path / "b"
    asyncio.run(evaluate(solver, [(s := __import__("temper.envs.registry", fromlist=["x"]).parse_spec(NIAH),
                                   s.tasks()[:10])], EvalConfig.from_recipe(dict(progress=False)), a))
    asyncio.run(evaluate(solver, [(s, s.tasks()[10:])], EvalConfig.from_recipe(dict(progress=False)), b))
    e = compare_runs(a, b).suites[NIAH]
    assert e["method"] == "unpaired" and e["paired"] == 0 and e["diff"] == 0.0


def test_bad_run_folders_fail_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for args, expected in ((["compare", str(tmp_path / "nope"), str(tmp_path / "empty")], "run folder not found"),
                           (["compare", str(tmp_path / "empty"), str(tmp_path / "empty")], "no summary.json")):
        result = CliRunner().invoke(app, args)
        assert result.exit_code != 0 and expected in str(result.exception), result.output
