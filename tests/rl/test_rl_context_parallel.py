"""Context parallelism in the trainer: samples longer than the micro-batch budget split across 2 ranks by ring
attention train the same weights as one process; with 4 ranks, FSDP2 over all of them and 2 context groups."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from temper.rl import RLConfig

pytestmark = pytest.mark.e2e

WORKER = Path(__file__).with_name("fsdp_worker.py")
BUDGET = 12  # micro_batch_tokens: the test's samples are 5-23 tokens, so about half are split


def _run(ranks: int, context_parallel: int, out: Path) -> dict:
    out.mkdir()
    launch = [sys.executable] if ranks == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                  "--nproc_per_node", str(ranks)]
    proc = subprocess.run([*launch, str(WORKER), str(out), str(context_parallel), str(BUDGET), "0"],
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


def _same_training(one: dict, many: dict) -> None:
    for m1, m2 in zip(one["metrics"], many["metrics"], strict=True):
        assert m2["loss"] == pytest.approx(m1["loss"], rel=1e-4, abs=1e-6)
        assert m2["grad_norm"] == pytest.approx(m1["grad_norm"], rel=1e-4)
        assert m2["tokens"] == m1["tokens"]
    for name, w in one["state"].items():
        torch.testing.assert_close(many["state"][name], w, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_context_parallel_ranks_train_what_one_process_does(tmp_path):
    one = _run(1, 1, tmp_path / "one")
    two = _run(2, 2, tmp_path / "cp2")
    assert one["context_split"] == 0 and two["context_split"] > 0 and two["sharded"]
    _same_training(one, two)
    four = _run(4, 2, tmp_path / "fsdp2-cp2")  # FSDP2 over 4 ranks, two context groups of 2
    assert four["world"] == 4 and four["context_split"] > 0
    _same_training(one, four)


def test_context_parallel_must_divide_the_ranks_and_keeps_token_ratios():
    with pytest.raises(ValueError, match=r"must divide trainer\.world_size"):
        RLConfig.model_validate({"trainer": {"world_size": 3, "context_parallel": 2}})
    with pytest.raises(ValueError, match="tis sequence"):
        RLConfig.model_validate({"trainer": {"world_size": 2, "context_parallel": 2},
                                 "off_policy": {"tis": "sequence"}})
