"""`temper train` with the trainer as FSDP2 ranks it spawns itself (algorithm.trainer.world_size: 2, gloo):
the same losses and weights as one process, a sharded checkpoint, resume after kill -9 of the whole run,
and a killed rank stopping the run with one line that names it."""

import copy
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from orch_helpers import metrics, run_tiny, snapshot, tiny_config

from temper.models import load_model
from temper.models.checkpoint import load_state_dict
from temper.orchestrator.config import TrainConfig
from temper.rl.trainer import Trainer
from temper.rl.trainer_group import RankGroup
from temper.runtime import apply_runtime
from temper.trajectory import Trajectory

pytestmark = pytest.mark.e2e

# synchronous (staleness 0), no refills, no evaluation: both runs train on the same rollouts
SYNC = {"group_size": 8, "batch_groups": 2, "max_staleness": 0, "concurrency": 16, "max_refills": 0}
NO_EVAL = {"suite": None, "before": False, "after": False}
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def audit(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "audit.jsonl").read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def reap(pids: list[int], timeout: float = 30.0) -> None:
    """The ranks leave when their driver does; any still there after `timeout` is killed here, by its pid."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"trainer ranks {left} outlived their run"


def start(tmp_path: Path, model: Path, out: Path, steps: int) -> subprocess.Popen:
    cfg = tiny_config(model, out, max_steps=steps, eval=NO_EVAL, orchestrator=SYNC,
                      algorithm__trainer__world_size=2)
    cfg.pop("out")
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return subprocess.Popen([sys.executable, "-m", "temper", "train", "-c", str(tmp_path / "cfg.yaml"), "--out",
                             str(out)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_rows(proc: subprocess.Popen, out: Path, n: int) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if (out / "metrics.jsonl").exists() and len((out / "metrics.jsonl").read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    raise AssertionError(f"no {n} steps in 240 s")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_ranks_match_one_process(toy_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = tmp_path / "two"
    batches: list[list[Trajectory]] = []  # what the driver handed the ranks, step by step
    step = RankGroup.step

    def recorded(self: RankGroup, trajectories: list[Trajectory]):
        batches.append(copy.deepcopy(trajectories))
        return step(self, trajectories)

    monkeypatch.setattr(RankGroup, "step", recorded)
    run_tiny(toy_model, two, max_steps=3, eval=NO_EVAL, orchestrator=SYNC, algorithm__trainer__world_size=2)
    # two ranks ran, in processes of their own (now gone), and wrote one shard file each
    (started,) = [a for a in audit(two) if a["kind"] == "start"]
    pids = started["trainer_pids"]
    assert started["trainer_world_size"] == 2 and len(set(pids)) == 2 and os.getpid() not in pids
    reap(pids)
    final = two / "checkpoints" / "step_000003"
    assert sorted(p.name for p in (final / "dcp").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert json.loads((final / "meta.json").read_text())["world_size"] == 2
    assert not (final / "trainer.pt").exists()
    for r in (0, 1):
        assert "step -> version 3" in (two / "trainer" / f"rank_{r}.log").read_text()
    m2 = metrics(two)
    assert [r["step"] for r in m2] == [1, 2, 3] and len(batches) == 3
    # One process (the Trainer temper train builds for world_size 1) trained on the same batches: the same losses,
    # gradient norms and weights, bit for bit. (A one-process *run* samples its own rollouts: their logprobs
    # depend on how the engine happened to batch the requests, and Adam turns a gradient that differs by
    # rounding into a different step, so two runs' weights drift apart without either trainer being wrong.)
    cfg = TrainConfig.model_validate(yaml.safe_load((two / "config.yaml").read_text()))  # the run's, as resolved
    apply_runtime(cfg.runtime)
    loaded = load_model(str(toy_model))
    one = Trainer(loaded.model, cfg.algorithm, pad_id=loaded.tokenizer.pad_token_id,
                  temperature=cfg.agent.temperature or 1.0)
    for batch, row in zip(batches, m2, strict=True):
        m = one.step(batch).as_metrics()
        for key in ("loss", "grad_norm", "tokens", "entropy"):
            assert row[f"trainer/{key}"] == m[key], (row["step"], key)
    w1, w2 = one.policy_state_dict(), load_state_dict(final / "model")
    assert set(w1) - set(w2) <= {"lm_head.weight"} and set(w2) <= set(w1)  # the saved folder ties it to embed_tokens
    assert not torch.equal(w2["model.embed_tokens.weight"], load_state_dict(toy_model)["model.embed_tokens.weight"])
    for name, w in w2.items():
        assert torch.equal(w, w1[name]), name


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_kill9_of_the_whole_run_then_resume_from_shards(toy_model: Path, tmp_path: Path) -> None:
    out, steps = tmp_path / "run", 5
    proc = start(tmp_path, toy_model, out, steps)
    wait_rows(proc, out, 2)
    pids = next(a for a in audit(out) if a["kind"] == "start")["trainer_pids"]
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and both ranks at once
    proc.wait(timeout=30)
    reap(pids)
    before = snapshot(out / "store.sqlite")

    res = subprocess.run([sys.executable, "-m", "temper", "train", "--resume", str(out)], env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    (resume,) = [a for a in audit(out) if a["kind"] == "resume"]
    assert resume["trainer_world_size"] == 2 and resume["step"] >= 2
    reap(resume["trainer_pids"])
    # the ranks loaded the committed checkpoint's shards and went on from its policy version
    loaded = [x for x in (out / "trainer" / "rank_0.log").read_text().splitlines() if x.startswith("loaded ")]
    assert len(loaded) == 1 and loaded[0].startswith(f"loaded {out / 'checkpoints' / resume['checkpoint']} (")
    version = int(loaded[0].rsplit(" ", 1)[1].rstrip(")"))
    first = next(r for r in metrics(out) if r["step"] == resume["step"] + 1)
    assert first["train_version"] == version >= 1
    # nothing lost, nothing trained on twice: every step committed once, consumed marks kept
    after = snapshot(out / "store.sqlite")
    assert set(before) <= set(after)
    for tid, (status, step) in before.items():
        if status == "consumed":
            assert after[tid] == (status, step)
    db = sqlite3.connect(out / "store.sqlite")
    assert [s for (s,) in db.execute("SELECT step FROM steps ORDER BY step")] == list(range(1, steps + 1))
    per_step = dict(db.execute("SELECT consumed_step, COUNT(DISTINCT group_id) FROM trajectories "
                               "WHERE consumed_step IS NOT NULL GROUP BY consumed_step"))
    db.close()
    assert per_step == {s: SYNC["batch_groups"] for s in range(1, steps + 1)}
    latest = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    assert sorted(p.name for p in (latest / "dcp").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_killed_rank_stops_the_run_with_one_line_then_it_resumes(toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start(tmp_path, toy_model, out, 40)
    wait_rows(proc, out, 2)
    pids = next(a for a in audit(out) if a["kind"] == "start")["trainer_pids"]
    os.kill(pids[1], signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=120)  # stops, not hangs
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reap(pids)
    err = err.decode()
    lines = [x for x in err.splitlines() if x.strip()]
    assert proc.returncode == 1, err[-2000:]
    assert "Traceback" not in err
    assert lines[-1].startswith(f"error: trainer rank 1 (pid {pids[1]}) died (killed by signal 9)"), err[-2000:]
    assert "rank 1/2" in lines[-1] or "step -> version" in lines[-1]  # its last log lines
    committed = len(metrics(out))
    res = subprocess.run([sys.executable, "-m", "temper", "train", "--resume", str(out), "--set",
                          f"max_steps={committed + 1}"], env=ENV, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    (resume,) = [a for a in audit(out) if a["kind"] == "resume"]
    reap(resume["trainer_pids"])
    assert metrics(out)[-1]["step"] == committed + 1
