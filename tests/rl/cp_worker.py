"""One step of a tiny model on one sequence split over the ranks by ring attention (context parallelism).

Used by test_rl_ring_attention.py: `torchrun --nproc_per_node 2 cp_worker.py OUT`. Every rank runs the model on
its zigzag share of each case's sequence, with global positions; the losses and gradients are summed over the
ranks and rank 0 saves them, with how many key/value blocks each rank computed and skipped.
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_model

from temper.rl.logprobs import token_logprobs
from temper.rl.ring_attention import RingAttention, zigzag_positions

# (length, sliding window): lengths divisible by 2 ranks' 4 chunks and not, one shorter than a window's reach
CASES = [(12, None), (37, None), (64, None), (37, 8)]


def case(length: int, window: int | None):
    """The model, token ids and per-token loss weights of a case (the same on every rank and in the test)."""
    model = make_model(seed=1, sliding_window=window)
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(0, model.config.vocab_size, (length,), generator=g)
    weights = torch.rand(length, generator=g)
    weights[-1] = 0.0  # the last position predicts nothing
    return model, ids, weights


def loss_of(model, ids: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor, attention=None) -> torch.Tensor:
    """Weighted negative logprob of each of `positions`' next tokens."""
    targets = torch.roll(ids, -1)
    hidden = model(ids[positions], positions, attention)
    logp, _ = token_logprobs(model.lm_head, hidden, targets[positions], chunk=16)
    return -(weights[positions] * logp).sum()


def main(out: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {}
    for length, window in CASES:
        model, ids, weights = case(length, window)
        loss = loss_of(model, ids, weights, zigzag_positions(length, world, rank),
                       RingAttention(length, sliding_window=window))
        loss.backward()
        summed = loss.detach().clone()
        dist.all_reduce(summed)
        grads = {}
        for name, p in model.named_parameters():
            dist.all_reduce(p.grad)
            grads[name] = p.grad
        results[(length, window)] = {"loss": float(summed), "grads": grads}
    if rank == 0:
        torch.save({"world": world, "results": results}, out / "result.pt")
    # every rank past its last send and receive before the group goes: one fresh-clone run saw rank 1 abort at
    # exit ("terminate called without an active exception"), as gloo does when a transfer is still in flight
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
