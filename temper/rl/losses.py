"""Per-token losses and their aggregation.

The losses work on flat tensors of the loss tokens of a micro-batch (one entry per model-generated
token). Aggregation is a per-token weight fixed for the whole optimizer step (`set_loss_weights`, for
RL and SFT alike), so that a loss summed over micro-batches equals the loss of one big batch.
"""

from typing import Literal

import torch

from temper.rl import distributed as dist
from temper.rl.batching import MicroBatch

Aggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clip with separate bounds (clip-higher) and dual clip; returns per-token loss and masks.

    r = exp(logp - old_logp)
    L = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))
    dual clip (A < 0 only): L = min(L, -A c), which bounds the update when r explodes.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    stats = {
        "clipped_high": ((ratio > 1 + clip_high) & (adv > 0)).detach(),
        "clipped_low": ((ratio < 1 - clip_low) & (adv < 0)).detach(),
    }
    if dual_clip is not None:
        if dual_clip <= 1:
            raise ValueError(f"dual_clip must be > 1 (got {dual_clip})")
        capped = torch.minimum(loss, -adv * dual_clip)
        loss = torch.where(adv < 0, capped, loss)
        stats["clipped_dual"] = ((adv < 0) & (ratio > dual_clip)).detach()
    return loss, stats


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: Literal["k1", "k3"] = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || ref) from samples of pi (Schulman's k1 / k3).

    k1 = logp - ref_logp (unbiased, can be negative);
    k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1 (unbiased, always >= 0, lower variance).
    """
    if estimator == "k1":
        return logp - ref_logp
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def token_weights(lengths: list[int], mode: Aggregation, norm_length: int | None = None) -> list[float]:
    """The weight of each token of each sequence, so that sum(weight * loss) aggregates as `mode`.

    lengths: loss tokens per sequence over the whole optimizer step (all micro-batches, all ranks).
    token_mean:   sum_t l_t / sum_i n_i                (every token counts the same)
    seq_mean:     (1 / S) sum_i (1 / n_i) sum_t l_t     (every sequence counts the same)
    seq_sum_norm: sum_t l_t / (S * L), L = norm_length or max_i n_i  (Dr. GRPO: no length bias)
    """
    s = len([n for n in lengths if n > 0])
    if s == 0:
        return [0.0 for _ in lengths]
    if mode == "token_mean":
        total = sum(lengths)
        return [1.0 / total for _ in lengths]
    if mode == "seq_mean":
        return [1.0 / (n * s) if n else 0.0 for n in lengths]
    if mode == "seq_sum_norm":
        big_l = norm_length or max(lengths)
        return [1.0 / (s * big_l) for _ in lengths]
    raise ValueError(f"unknown aggregation {mode!r}")


def set_loss_weights(mbs: list[MicroBatch], num_samples: int, mode: Aggregation, norm_length: int | None = None
                     ) -> None:
    """values.weight of every loss token of the step's micro-batches (of every rank), so that summing
    weight * loss over them aggregates as `mode`; a token with values.keep = 0 (fillers') counts nowhere."""
    device = mbs[0].targets.device if mbs else None  # the trainer's (its micro-batches follow the model)
    lengths = torch.zeros(num_samples, device=device)
    for mb in mbs:
        lengths.index_add_(0, torch.tensor(mb.sample_ids, device=device)[mb.seq_index], mb.values.keep)
    weights = torch.tensor(token_weights([int(n) for n in dist.all_reduce_sum(lengths).tolist()], mode, norm_length),
                           device=device)
    for mb in mbs:
        mb.values.weight = weights[torch.tensor(mb.sample_ids, device=device)[mb.seq_index]] * mb.values.keep
