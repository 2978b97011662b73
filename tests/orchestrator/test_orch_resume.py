"""kill -9 a real `temper train` mid-run, resume it, and check the store: no completed trajectory
lost, none trained on twice, every step's batch committed exactly once; the summary's counters
cover the whole run, not only the resumed process."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from orch_helpers import snapshot, tiny_config

pytestmark = pytest.mark.e2e

STEPS, GROUPS = 24, 4


def temper(*args: str) -> list[str]:
    return [sys.executable, "-m", "temper", *args]


def test_kill9_then_resume_loses_nothing_and_counts_nothing_twice(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = tiny_config(toy_model, out, max_steps=STEPS, eval={"suite": "toy:n=8,seed=99,digits=2", "n": 8})
    cfg.pop("out")
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(temper("train", "-c", str(tmp_path / "cfg.yaml"), "--out", str(out)), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    metrics = out / "metrics.jsonl"
    while time.monotonic() < deadline:  # wait until a few steps are committed, then SIGKILL mid-run
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 6:
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = snapshot(out / "store.sqlite")
    done_before = {i for i, (s, _) in before.items() if s in ("complete", "consumed", "filtered", "failed")}
    assert done_before

    res = subprocess.run(temper("train", "--resume", str(out)), env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    after = snapshot(out / "store.sqlite")
    assert done_before <= set(after), "a completed trajectory was lost"
    db = sqlite3.connect(out / "store.sqlite")
    steps = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY step")]
    assert steps == list(range(1, STEPS + 1))
    per_step = dict(db.execute("SELECT consumed_step, COUNT(DISTINCT group_id) FROM trajectories "
                               "WHERE consumed_step IS NOT NULL GROUP BY consumed_step"))
    assert all(per_step.get(s, 0) <= GROUPS for s in steps) and sum(per_step.values()) >= STEPS * GROUPS - STEPS
    # a trajectory has one consumed_step at most (the column holds one): marks from the killed run that
    # committed stay as they were, and nothing consumed before the crash was consumed again
    for tid, (status, step) in before.items():
        if status == "consumed":
            assert after[tid] == (status, step)
    audit = [json.loads(x) for x in (out / "audit.jsonl").read_text().splitlines()]
    (resume,) = [a for a in audit if a["kind"] == "resume"]
    # the before evaluation ran once (the resumed process read eval_before.json), the after one at the end
    assert [a["which"] for a in audit if a["kind"] == "eval"] == ["before", "after"]

    # The summary's counters cover both processes: they are the store's totals, the killed run's included.
    training = json.loads((out / "summary.json").read_text())["training"]
    done_after = {i for i, (s, _) in after.items() if s != "in_flight"}
    assert training["episodes"] == len(done_after) == len(done_before) + len(done_after - done_before)
    assert training["failed_episodes"] == sum(s == "failed" for s, _ in after.values())
    dropped = resume["dropped_in_flight"] // cfg["orchestrator"]["group_size"]  # whole groups only
    assert training["groups_dropped_in_flight"] == dropped
    assert training["groups_started"] == db.execute("SELECT COUNT(DISTINCT group_id) FROM trajectories"
                                                    ).fetchone()[0] + dropped
    assert training["groups_completed"] == db.execute(
        "SELECT COUNT(DISTINCT group_id) FROM trajectories WHERE status IN ('complete', 'consumed', 'stale')"
    ).fetchone()[0] >= STEPS * GROUPS - STEPS
    assert training["retries"] == 0 and 0 <= training["max_staleness_seen"] <= 1
