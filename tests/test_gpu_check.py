"""scripts/gpu_check.sh: on a machine without CUDA it says so in one line and exits 2; with CUDA it runs
the GPU paths (parity, a training step) and reports them in its JSON line."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)
def test_gpu_check_reports_what_this_machine_has() -> None:
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--skip-rollout", "--max-new", "16"],
                       capture_output=True, text=True, timeout=880)
    last = json.loads(r.stdout.strip().splitlines()[-1])
    if not torch.cuda.is_available():
        assert r.returncode == 2 and last == {"cuda": False}
        assert r.stderr.strip() == "gpu_check: no CUDA device on this machine (torch.cuda.is_available() is False)"
        return
    assert r.returncode == 0, r.stderr[-2000:]
    assert last["device"] == "cuda" and last["parity_identical_token_share"] > 0.5
    assert last["train_params_changed"] == last["train_params"] and last["train_param_dtypes"] == ["torch.float32"]
