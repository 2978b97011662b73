"""Context parallelism in the trainer: which samples are split across ranks, and each rank's share of one.

With `trainer.context_parallel: N`, the world's ranks form groups of N consecutive ranks. A sample longer
than `micro_batch_tokens` (it would be a row of its own anyway) is a micro-batch of one sequence that all N
ranks of one group run together, each on its zigzag share of the tokens with their global positions, its
attention a ring over the group (ring_attention.py); the long samples are dealt out over the groups. Shorter
samples are packed and dealt out over all ranks as without context parallelism.

Every loss token lives on exactly one rank, so the step's loss weights (summed over all ranks) and FSDP's
gradient reduction over all ranks are unchanged: the update equals one process's on the whole batch.
"""

from dataclasses import fields

import torch
import torch.distributed as tdist

from temper.rl.batching import MicroBatch, TokenValues
from temper.rl.ring_attention import zigzag_positions


def context_group(size: int) -> tdist.ProcessGroup:
    """This rank's group of `size` consecutive ranks. Every rank creates every group, as new_group requires."""
    world, rank = tdist.get_world_size(), tdist.get_rank()
    groups = [tdist.new_group(list(range(g * size, (g + 1) * size))) for g in range(world // size)]
    return groups[rank // size]


def is_long(num_tokens: int, micro_batch_tokens: int, context_parallel: int) -> bool:
    """Whether a sample is split across a context group (rather than packed with others on one rank)."""
    return context_parallel > 1 and num_tokens > micro_batch_tokens


def shard_micro_batch(mb: MicroBatch, group: tdist.ProcessGroup) -> MicroBatch:
    """This rank's share of a one-sequence micro-batch (no padding): its zigzag positions' tokens, and the loss
    tokens they predict (with their values), indexed into the shorter row."""
    if mb.input_ids.shape[0] != 1 or mb.packed or mb.segments != [[mb.input_ids.shape[1]]]:
        raise ValueError(f"context parallelism splits one unpadded sequence, not rows {mb.segments}")
    length, world, rank = mb.input_ids.shape[1], tdist.get_world_size(group), tdist.get_rank(group)
    held = zigzag_positions(length, world, rank).to(mb.input_ids.device)
    local = torch.full((length,), -1, dtype=torch.long, device=held.device)
    local[held] = torch.arange(len(held), device=held.device)
    mine = local[mb.index] >= 0
    v = mb.values
    values = TokenValues(**{f: None if (t := getattr(v, f)) is None else t[mine] for f in
                           (x.name for x in fields(v))})
    return MicroBatch(input_ids=mb.input_ids[:, held], positions=mb.positions[:, held], segments=[[len(held)]],
                      packed=False, padding_mask=mb.padding_mask[:, held], index=local[mb.index][mine],
                      targets=mb.targets[mine], seq_index=mb.seq_index[mine], sample_ids=mb.sample_ids,
                      values=values, filler=mb.filler, context_group=group, context_length=length)
