"""FSDP2 helpers: the process group (from torchrun's environment, or given by `temper train`'s rank
spawner), sharding, and reductions.

Under torchrun every rank receives the same global list of trajectories, computes the same
advantages and the same micro-batch layout, and trains on micro-batches i with i % world == rank.
Loss weights are fixed over the global batch and FSDP averages gradients over ranks, so each
rank's loss is multiplied by the world size: the update equals one process on the whole batch.
"""

import os

import torch
import torch.distributed as dist
from torch import nn


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def init_from_env(backend: str | None = None) -> bool:
    """Initialise the default process group when launched by torchrun (WORLD_SIZE > 1)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return is_distributed()
    dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    return True


def init_rank(rank: int, world_size: int, master_port: int, backend: str, master_addr: str = "127.0.0.1") -> None:
    """Join a process group on master_addr:master_port (the ranks `temper train` starts itself: rank 0's node)."""
    dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank,
                            world_size=world_size)


def comm_device() -> torch.device:
    """Where collective tensors must live: NCCL reduces CUDA tensors only, gloo CPU ones."""
    if is_distributed() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def shard_model(model: nn.Module) -> nn.Module:
    """fully_shard each decoder layer (its own all-gather unit), then the root (embeddings, norm, head)."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In place (on t's own device, whatever device the backend reduces on)."""
    if is_distributed():
        on = t.to(comm_device())
        dist.all_reduce(on, op=dist.ReduceOp.SUM)
        if on is not t:
            t.copy_(on)
    return t


def all_reduce_max(value: int) -> int:
    if not is_distributed():
        return value
    t = torch.tensor([value], dtype=torch.long, device=comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor (FSDP2 parameter, gradient norm) as a plain tensor; a plain tensor as itself."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def clip_grad_norm_(params: list[nn.Parameter], max_norm: float) -> float:
    """torch.nn.utils.clip_grad_norm_ (2-norm, the same clip coefficient), with a total norm that one process and
    any number of FSDP2 ranks agree on bit for bit: the squares are summed in float64 (each is exact there),
    rank-local over its shards then over ranks, and the root rounded to float32 once. torch's total sums float32
    norms per shard and per tensor, so its rounding follows the sharding; a 1-ulp different clip coefficient was
    enough for the same batch to train different weights after a few Adam steps (Adam's first steps move a
    gradient of pure rounding noise by a full learning rate)."""
    grads = [p.grad for p in params if p.grad is not None]
    local = []
    for g in grads:
        if hasattr(g, "to_local"):
            if not all(pl.is_shard() for pl in g.placements):
                raise NotImplementedError(f"gradient placements {g.placements}: only sharded ones are summed once")
            g = g.to_local()
        local.append(g)
    squares = torch.zeros((), dtype=torch.float64)
    for g in local:
        squares += g.detach().double().square().sum().cpu()
    total = all_reduce_sum(squares).sqrt().float()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in local:
        g.detach().mul_(coef.to(g.device))
    return float(total)
