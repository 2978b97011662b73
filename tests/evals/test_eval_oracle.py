"""`--oracle`: HumanEval 164/164 and the terminal suite at 100%; a do-nothing solver at 0%;
a `temper eval` killed with SIGKILL resumes, running only the items it had not finished."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.solvers import NoopSolver, OracleSolver

pytestmark = [__import__("pytest").mark.slow, __import__("pytest").mark.e2e]


def temper(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-m", "temper", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_humaneval_oracle_scores_164_of_164_through_the_cli(tmp_path: Path) -> None:
    p = temper("eval", "--oracle", "--suite", "humaneval", "--out", str(tmp_path / "run"), cwd=tmp_path)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-2000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())["suites"]["humaneval"]
    lines = (tmp_path / "run" / "suites" / "humaneval" / "items.jsonl").read_text().splitlines()
    items = [json.loads(x) for x in lines]
    failed = [(i["base_id"], i["error"], i["info"]) for i in items if i["reward"] != 1.0]
    assert (s["n"], s["mean_reward"], s["pass@1"], s["infra_failures"]) == (164, 1.0, 1.0, 0), failed
    assert "humaneval: n=164 mean_reward=1.000" in out
    assert len(items) == 164 and not failed
    assert (tmp_path / "run" / "report.md").is_file() and (tmp_path / "run" / "report.html").is_file()


def test_a_solver_that_does_nothing_scores_zero(tmp_path: Path) -> None:
    cfg = EvalConfig.from_recipe(dict(limit=8, progress=False))
    run = asyncio.run(evaluate(NoopSolver(), ["humaneval", "terminal"], cfg, tmp_path))
    for spec in ("humaneval", "terminal"):
        s = run.summary["suites"][spec]
        assert (s["n"], s["mean_reward"], s["pass@1"], s["infra_failures"]) == (8, 0.0, 0.0, 0), (spec, s)


def test_a_killed_run_resumes_running_only_unfinished_items(tmp_path: Path) -> None:
    out = tmp_path / "run"
    items = out / "suites" / "terminal" / "items.jsonl"
    args = ("eval", "--oracle", "--suite", "terminal", "--out", str(out), "--concurrency", "1", "--limit", "12")
    p = temper(*args, start_new_session=True, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not items.is_file() or len(items.read_text().splitlines()) < 3):
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)  # the whole process group, sandboxes included
    p.wait()
    finished = len([x for x in items.read_text().splitlines() if x.endswith("}")])
    assert 3 <= finished < 12 and not (out / "summary.json").exists()

    p = temper(*args, cwd=tmp_path)  # its sandboxes' audit log goes to runs/sandbox of the cwd
    stdout, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-2000:]
    assert f"ran {12 - finished} items ({finished} already done)" in stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["run"]["executed"] == 12 - finished
    t = s["suites"]["terminal"]
    assert (t["n"], t["mean_reward"], t["pass@1"], t["infra_failures"]) == (12, 1.0, 1.0, 0)
    keys = [(r["task_id"], r["sample"]) for r in map(json.loads, items.read_text().splitlines())]
    assert len(keys) == len(set(keys)) == 12  # nothing ran twice


def test_terminal_oracle_is_100_percent(tmp_path: Path) -> None:
    run = asyncio.run(evaluate(OracleSolver(), ["terminal"], EvalConfig.from_recipe(dict(progress=False)), tmp_path))
    t = run.summary["suites"]["terminal"]
    assert (t["n"], t["mean_reward"], t["pass@1"], t["infra_failures"]) == (27, 1.0, 1.0, 0)
