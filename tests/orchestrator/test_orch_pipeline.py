"""The tiny recipe through `train()`: synchronous and asynchronous runs both learn; staleness stays
within its bound and is really > 0 when asynchronous; faults are retried, masked and reported."""

import itertools
import json
import sqlite3
from pathlib import Path

import pytest
from orch_helpers import metrics, run_tiny

pytestmark = pytest.mark.e2e


def learned(summary: dict) -> bool:
    return summary["after"]["mean_reward"] > summary["before"]["mean_reward"] + 0.3 and summary["difference"][
        "change"] == "improved"


def outcome(summary: dict) -> dict:
    """What a failed `learned` shows: the evaluations and the run's staleness."""
    return {"before": summary["before"]["mean_reward"], "after": summary["after"]["mean_reward"],
            "change": summary["difference"]["change"], "staleness": summary["training"]["max_staleness_seen"]}


def test_synchronous_run_learns_with_zero_staleness(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "sync"
    summary = run_tiny(toy_model, out, orchestrator__max_staleness=0)
    assert learned(summary), outcome(summary)
    rows = metrics(out)
    assert len(rows) == 30 and all(r["staleness_max"] == 0 for r in rows)
    assert summary["training"]["max_staleness_seen"] == 0
    # where each step's time went: waiting for rollouts, training, weights to the engine, the checkpoint (in the
    # next step's step_s), and the batch's episodes' own phases (summed over concurrent episodes)
    for r, nxt in itertools.pairwise(rows):
        assert r["push_s"] > 0 and r["checkpoint_s"] > 0 and r["episodes_generate_s"] > 0
        assert nxt["step_s"] >= nxt["batch_wait_s"] + nxt["train_s"] + nxt["push_s"] + r["checkpoint_s"] - 1e-3
    assert all(r["episodes_verify_s"] > 0 and r["episodes_tools_s"] < r["episodes_generate_s"] for r in rows)
    # checkpoints are written in the background (orchestrator.async_checkpoints): each save after the first
    # waited for the previous write, which took time of its own, and every step committed with its checkpoint
    assert "checkpoint_write_s" not in rows[0] and all(r["checkpoint_write_s"] > 0 for r in rows[1:])
    steps = sqlite3.connect(out / "store.sqlite").execute("SELECT step, checkpoint FROM steps ORDER BY step").fetchall()
    assert [s for s, _ in steps] == list(range(1, 31)) and all(c for _, c in steps)  # named by trainer steps
    assert steps[-1][1] == (out / "checkpoints" / "latest").read_text().strip()
    # rollouts thrown away: the groups generated to the end per group kept, counted here from the store's rows
    status = dict(sqlite3.connect(out / "store.sqlite").execute(
        "SELECT status, COUNT(DISTINCT group_id) FROM trajectories GROUP BY status").fetchall())
    kept = status.get("complete", 0) + status.get("consumed", 0)
    assert summary["training"]["generated_per_kept"] == round((kept + status.get("filtered", 0)) / kept, 3)
    assert all(r["generated_per_kept"] >= 1 for r in rows)
    # the cores are shared (temper/cores.py): synchronous, the trainer always works alone and takes both, and
    # the engine's steps take both while the trainer waits for a batch
    assert all(r["trainer_all_cores"] == 1.0 for r in rows) and rows[-1]["engine_steps_all_cores"] > 0
    files = {p.name for p in out.iterdir()}
    assert {"config.yaml", "metrics.jsonl", "store.sqlite", "checkpoints", "audit.jsonl", "summary.md",
            "summary.json", "eval_before.json", "eval_after.json"} <= files
    s = json.loads((out / "summary.json").read_text())
    for side in ("before", "after"):
        assert set(s[side]) >= {"n", "mean_reward", "ci_low", "ci_high"} and s[side]["n"] == 64
        assert s[side]["wall_s"] > 0  # the evaluation's own time, outside the steps
        assert s[side]["ci_low"] <= s[side]["mean_reward"] <= s[side]["ci_high"]
    d = s["difference"]  # temper.evals.compare.difference: after - before, paired per task
    assert set(d) >= {"diff", "ci_low", "ci_high", "change"} and (d["method"], d["paired"]) == ("paired", 64)
    # the harness's own folders (summary.json, items.jsonl), which `temper compare` reads
    for which in ("before", "after-step-30"):
        (items,) = (out / "eval" / which / "suites").glob("*/items.jsonl")
        assert (out / "eval" / which / "summary.json").is_file() and len(items.read_text().splitlines()) == 64


def test_asynchronous_run_learns_and_observes_bounded_staleness(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "async"
    summary = run_tiny(toy_model, out, orchestrator__max_staleness=2, eval__every=10)
    assert learned(summary), outcome(summary)
    audit = [json.loads(x) for x in (out / "audit.jsonl").read_text().splitlines()]
    mid = [a for a in audit if a["kind"] == "eval" and a["which"].startswith("step")]
    assert mid and mid[0]["n"] == 64  # a low-priority evaluation ran while training went on
    rows = metrics(out)
    assert max(r["staleness_max"] for r in rows) <= 2
    assert max(r["staleness_max"] for r in rows) > 0  # overlap really happened
    # every trained trajectory's versions in the store agree: none lags more than the bound
    db = sqlite3.connect(out / "store.sqlite")
    lags = db.execute("SELECT json_extract(s.metrics, '$.train_version') - t.min_version FROM trajectories t "
                      "JOIN steps s ON s.step = t.consumed_step "
                      "WHERE t.status = 'consumed' AND t.min_version >= 0").fetchall()
    assert lags and max(lag for (lag,) in lags) <= 2


def test_fault_injection_retries_masks_and_reports(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "faults"
    summary = run_tiny(
        toy_model, out, max_steps=8, eval__n=16, orchestrator__group_size=4,
        suites=[{"spec": "toy:n=64,seed=0,digits=2,sandbox=true", "max_concurrency": 16}],
        orchestrator__faults={"sandbox_kill_rate": 0.2, "worker_error_rate": 0.2, "seed": 1},
        orchestrator__retry={"max_attempts": 2, "backoff_s": 0.01},
    )
    t = summary["training"]
    assert summary["steps"] == 8
    assert t["retries"] > 0 and t["failures_sandbox_crash"] > 0 and t["failures_worker_error"] > 0
    # out of retries -> the task is quarantined and reported, its episode masked (status failed, never reward 0)
    assert t["failed_episodes"] > 0 and summary["quarantined"]
    assert summary["store"]["failed"] == t["failed_episodes"]
    md = (out / "summary.md").read_text()
    assert "Quarantined tasks" in md
    db = sqlite3.connect(out / "store.sqlite")
    assert db.execute("SELECT COUNT(*) FROM trajectories WHERE status='failed' AND consumed_step IS NOT NULL"
                      ).fetchone()[0] == 0
    rows = metrics(out)
    assert rows[-1]["injected/sandbox_kill"] > 0 and rows[-1]["injected/worker_error"] > 0


def test_replay_mixes_past_groups_and_partial_rollouts_off_still_learn(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay"
    summary = run_tiny(toy_model, out, orchestrator__replay={"enabled": True, "ratio": 0.25, "capacity": 16},
                       orchestrator__partial_rollouts=False)
    assert learned(summary), outcome(summary)
    rows = metrics(out)
    assert sum(r["replayed_groups"] for r in rows) > 0
    db = sqlite3.connect(out / "store.sqlite")
    assert db.execute("SELECT COUNT(*) FROM replays").fetchone()[0] == sum(r["replayed_groups"] for r in rows)
    # without partial rollouts no sample spans two policy versions
    for (data,) in db.execute("SELECT data FROM trajectories WHERE status='consumed'"):
        t = json.loads(data)
        assert len({v for v, m in zip(t["versions"], t["loss_mask"], strict=True) if m}) <= 1
