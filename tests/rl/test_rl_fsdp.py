"""FSDP2 on gloo: 2 processes give the same losses and updated weights as 1 process on the same global batch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.e2e

WORKER = Path(__file__).with_name("fsdp_worker.py")


def _run(args: list[str], out: Path) -> dict:
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*args, str(WORKER), str(out)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


@pytest.mark.slow
def test_fsdp2_two_processes_match_one(tmp_path):
    one = _run([sys.executable], tmp_path / "one")
    two = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
               tmp_path / "two")
    assert one["world"] == 1 and two["world"] == 2 and two["sharded"] and not one["sharded"]
    for m1, m2 in zip(one["metrics"], two["metrics"], strict=True):
        assert m2["loss"] == pytest.approx(m1["loss"], rel=1e-4, abs=1e-6)
        assert m2["grad_norm"] == pytest.approx(m1["grad_norm"], rel=1e-4)
        assert m2["tokens"] == m1["tokens"]
    assert one["state"].keys() == two["state"].keys()
    for name, w in one["state"].items():
        torch.testing.assert_close(two["state"][name], w, rtol=1e-4, atol=1e-5, msg=name)
    assert (Path(two["ckpt"]) / "model" / "model.safetensors").is_file()
