"""`temper train --set algorithm.loss.kl_coef=0.05 --max-steps 2` trains at the recipe's learning rate and
schedule (once, one --set rebuilt the whole algorithm section from class defaults: lr 1e-5, cosine over 1000
steps, keep_best on), with a KL to the starting weights; every metric a checkpoint may be ranked by is written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from temper.config import read_recipe
from temper.orchestrator.config import RANKING_METRICS

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.mark.timeout(600)
def test_one_set_keeps_the_recipes_learning_rate_and_schedule(tmp_path: Path, toy_model: Path) -> None:
    out = tmp_path / "run"
    sets = ["algorithm.loss.kl_coef=0.05", f"model={toy_model}", "suites=[{spec: 'toy:n=64,seed=0,digits=2'}]",
            "eval.suite=null", "agent.max_turn_tokens=1", "agent.system_prompt=say", "engine.kv_budget_bytes=16000000",
            "orchestrator.max_staleness=0", "logging.progress=false", "logging.plots=false"]
    cmd = [sys.executable, "-m", "temper", "train", "--max-steps", "2", "--out", str(out)]
    r = subprocess.run(cmd + [a for s in sets for a in ("--set", s)], capture_output=True, text=True, timeout=540,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [row for row in rows if "trainer/lr" in row]
    assert [row["step"] for row in rows] == [1, 2] and trained, rows
    optim = read_recipe("train")["algorithm"]["optim"]
    assert optim["min_lr_ratio"] == 1.0  # the recipe's schedule is constant: every step at its lr
    assert all(row["trainer/lr"] == pytest.approx(optim["lr"]) for row in trained)
    assert all("trainer/kl" in row for row in trained)  # the KL term ran (against the starting weights)
    missing = {m for m in RANKING_METRICS for row in trained if m not in row}
    assert not missing, f"checkpoint.best_metric may name metrics a run does not write: {missing}"
    assert "kl_coef: 0.05" in (out / "config.yaml").read_text()
