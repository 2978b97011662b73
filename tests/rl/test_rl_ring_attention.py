"""Context parallelism: ring attention over 2 gloo ranks gives one process's loss and gradients."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cp_worker import CASES, case, loss_of

from temper.rl.ring_attention import zigzag_chunks, zigzag_positions

WORKER = Path(__file__).with_name("cp_worker.py")


def test_zigzag_gives_every_rank_two_chunks_and_every_position_once():
    for length in (8, 9, 37, 1000):
        for world in (1, 2, 3, 4):
            chunks = zigzag_chunks(length, world)
            assert len(chunks) == 2 * world and chunks[0][0] == 0 and chunks[-1][1] == length
            assert max(b - a for a, b in chunks) - min(b - a for a, b in chunks) <= 1
            held = torch.cat([zigzag_positions(length, world, r) for r in range(world)])
            assert sorted(held.tolist()) == list(range(length))
            # causal work (keys before each query) is balanced to within one query's (a contiguous split
            # would give the last of 2 ranks three times the first's: a difference of length^2 / 4)
            work = [int((zigzag_positions(length, world, r) + 1).sum()) for r in range(world)]
            assert max(work) - min(work) <= length


@pytest.mark.e2e
@pytest.mark.slow
def test_two_ranks_equal_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(WORKER), str(tmp_path)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(tmp_path / "result.pt", weights_only=False)
    assert got["world"] == 2
    for length, window in CASES:
        model, ids, weights = case(length, window)
        loss = loss_of(model, ids, weights, torch.arange(length))  # one process, the model's own attention
        loss.backward()
        two = got["results"][(length, window)]
        assert two["loss"] == pytest.approx(float(loss.detach()), rel=1e-5, abs=1e-5), (length, window)
        for name, p in model.named_parameters():
            torch.testing.assert_close(two["grads"][name], p.grad, rtol=1e-5, atol=1e-5, msg=f"{name} {length}")
