"""Checkpoints: resume continues exactly, writes are atomic, retention keeps the last K and the best."""

import json

import pytest
import torch
from conftest import make_model, make_trajectories

from temper.errors import TemperError
from temper.models.checkpoint import load_checkpoint
from temper.rl import RLConfig, Trainer
from temper.rl.checkpoint import list_checkpoints, resolve_checkpoint, write_snapshot


def _cfg() -> RLConfig:
    cfg = RLConfig()
    cfg.optim.lr = 1e-2
    cfg.optim.warmup_steps = 2
    cfg.optim.total_steps = 6
    cfg.trainer.micro_batch_tokens = 32
    return cfg


def _data(step: int):
    # the data for step i is drawn from the global torch RNG, so resuming must restore it
    seed = int(torch.randint(0, 10_000, (1,)))
    return make_trajectories(seed=seed + step, obs=True)


def _run(trainer: Trainer, steps: range) -> list[float]:
    losses = []
    for i in steps:
        losses.append(trainer.step(_data(i)).update.loss)
        trainer.data_cursor = i + 1
    return losses


def _started(seed: int, steps: int) -> tuple[Trainer, list[float]]:
    """A trainer seeded `seed` after `steps` steps, and their losses."""
    torch.manual_seed(seed)
    trainer = Trainer(make_model(), _cfg())
    return trainer, _run(trainer, range(steps))


def _resumed(root) -> tuple[Trainer, list[float]]:
    """A fresh trainer (other weights, other RNG state) loaded from root, run to step 5."""
    torch.manual_seed(999)  # a fresh process would start from some other RNG state
    resumed = Trainer(make_model(seed=7), _cfg())
    resumed.load_checkpoint(root)
    assert resumed.step_count == 2 and resumed.policy_version == 2 and resumed.data_cursor == 2
    return resumed, _run(resumed, range(resumed.data_cursor, 5))


def test_resume_matches_an_uninterrupted_run_exactly(tmp_path):
    full, expected = _started(123, 5)
    first, got = _started(123, 2)
    path = first.save_checkpoint(tmp_path, {"reward_mean": 0.5})
    resumed, rest = _resumed(tmp_path)
    assert got + rest == expected  # bit for bit
    for (n, a), b in zip(full.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b), n
    # the model folder is a plain HF checkpoint of the policy
    saved = load_checkpoint(path / "model")
    assert torch.equal(saved.model.embed_tokens.weight, first.model.model.embed_tokens.weight)


def test_a_snapshot_written_after_further_steps_is_the_checkpoint_of_its_own_step(tmp_path):
    """What the background writer relies on: the snapshot is a copy, so the steps taken while it is
    written change nothing in it, and resuming from it continues bit for bit."""
    _, expected = _started(11, 5)
    live, got = _started(11, 2)
    snap = live.snapshot_checkpoint({"reward_mean": 0.5})
    at_snapshot = {k: v.clone() for k, v in live.model.state_dict().items()}
    _run(live, range(2, 4))  # the next steps train while the snapshot waits to be written
    assert not torch.equal(live.model.model.embed_tokens.weight, at_snapshot["model.embed_tokens.weight"])
    path = write_snapshot(snap, tmp_path)
    assert path.name == "step_000002" and (tmp_path / "latest").read_text().strip() == "step_000002"
    saved = load_checkpoint(path / "model")
    assert torch.equal(saved.model.embed_tokens.weight, at_snapshot["model.embed_tokens.weight"])

    _, rest = _resumed(tmp_path)
    assert got + rest == expected  # optimizer, scheduler and RNG states are the snapshot's too


def test_resume_with_lora(tmp_path):
    cfg = _cfg()
    cfg.trainer.lora.enabled = True
    torch.manual_seed(5)
    full = Trainer(make_model(), cfg)
    expected = _run(full, range(3))
    torch.manual_seed(5)
    a = Trainer(make_model(), cfg)
    got = _run(a, range(1))
    a.save_checkpoint(tmp_path)
    b = Trainer(make_model(), cfg)
    b.load_checkpoint(tmp_path)
    got += _run(b, range(1, 3))
    assert got == expected


def test_crashed_write_is_never_loaded_and_retention(tmp_path):
    cfg = _cfg()
    cfg.checkpoint.keep_last, cfg.checkpoint.keep_best, cfg.checkpoint.best_metric = 2, True, "reward_mean"
    tr = Trainer(make_model(), cfg)
    rewards = [0.1, 0.9, 0.3, 0.2, 0.4]
    for r in rewards:
        tr.step(make_trajectories())
        tr.save_checkpoint(tmp_path, {"reward_mean": r})
    names = [p.name for p in list_checkpoints(tmp_path)]
    assert names == ["step_000002", "step_000004", "step_000005"]  # best (0.9) + the last two
    # a crash mid-write leaves a temporary folder or a folder without meta.json: both are ignored
    (tmp_path / ".tmp-step_000006-1").mkdir()
    (tmp_path / "step_000007").mkdir()
    (tmp_path / "step_000007" / "trainer.pt").write_bytes(b"partial")
    assert resolve_checkpoint(tmp_path).name == "step_000005"
    (tmp_path / "latest").write_text("step_000007\n")  # even if a pointer names it
    assert resolve_checkpoint(tmp_path).name == "step_000005"
    meta = json.loads((tmp_path / "step_000005" / "meta.json").read_text())
    assert meta["step"] == 5 and meta["metrics"]["reward_mean"] == 0.4
    with pytest.raises(TemperError, match="no complete checkpoint"):
        resolve_checkpoint(tmp_path / "nothing")


def test_a_write_that_fails_says_so_in_one_line_and_leaves_no_partial_folder(tmp_path):
    """A full disk, for real: the file-size limit (RLIMIT_FSIZE) makes the write fail as ENOSPC would."""
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from conftest import make_model, make_trajectories
from temper.errors import TemperError
from temper.rl import RLConfig, Trainer
from temper.rl.checkpoint import write_snapshot
trainer = Trainer(make_model(), RLConfig())
trainer.step(make_trajectories())
snap = trainer.snapshot_checkpoint()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_snapshot(snap, __import__("pathlib").Path({str(tmp_path)!r}))
except TemperError as e:
    print(e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    (line,) = r.stdout.strip().splitlines()
    assert line.startswith(f"{tmp_path}: writing checkpoint step_000001 failed (") and "GiB free there" in line
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary folder, no latest, no step folder
