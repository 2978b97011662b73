"""logging.tensorboard and logging.wandb: a tiny run writes a TensorBoard event file and an offline
W&B run, and both hold one point per step of the metrics it logged (read back, not just found)."""

import struct
from pathlib import Path

import pytest
from orch_helpers import metrics, run_tiny

pytestmark = pytest.mark.e2e

STEPS = 4


def wandb_history(run_file: Path) -> list[dict[str, str]]:
    """The history rows of an offline .wandb file: a LevelDB-style log (7-byte file header, 32 KiB
    blocks of records: crc32, length, type) of wandb's protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, pos, chunk, rows = run_file.read_bytes(), 32768, 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = pb.Record()
            record.ParseFromString(chunk)
            chunk = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): i.value_json for i in record.history.item})
    return rows


def test_tensorboard_and_offline_wandb_log_every_step(toy_model: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from temper.orchestrator.tracking import WANDB_ENV

    for k, v in WANDB_ENV.items():  # offline and quiet; set here so nothing leaks into later tests
        monkeypatch.setenv(k, v)
    out = tmp_path / "tracked"
    summary = run_tiny(toy_model, out, max_steps=STEPS, eval={"suite": None},
                       logging={"progress": False, "plots": False, "tensorboard": True, "wandb": True})
    assert summary["steps"] == STEPS
    rows = metrics(out)
    trained = [r["step"] for r in rows if "trainer/loss" in r]  # a step with no signal skips the update
    assert trained

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert tags == {k for r in rows for k, v in r.items() if isinstance(v, int | float)}  # every numeric field
    assert [e.value for e in events.Scalars("staleness")] == [float(r["staleness"]) for r in rows]
    assert [e.step for e in events.Scalars("reward")] == list(range(1, STEPS + 1))
    assert [round(e.value, 5) for e in events.Scalars("reward")] == [round(r["reward"], 5) for r in rows]
    assert [e.step for e in events.Scalars("trainer/loss")] == trained

    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    history = wandb_history(next(runs[0].glob("*.wandb")))
    assert [int(h["_step"]) for h in history] == list(range(1, STEPS + 1))
    assert [round(float(h["reward"]), 5) for h in history] == [round(r["reward"], 5) for r in rows]
    assert [int(h["_step"]) for h in history if "trainer/loss" in h] == trained
