"""Off-policy correction for stale rollouts.

The engine records mu(a) (behaviour logprobs), possibly several policy versions ago and with a
different numerical path; the trainer recomputes pi_old(a) with its current weights. The PPO ratio
is taken against pi_old and the policy-gradient term is reweighted by the truncated importance
weight min(pi_old / mu, cap) (token or sequence level); tokens whose weight falls outside
[mask_low, mask_high] carry no loss at all.
"""

from typing import Literal

import torch


def importance_weights(
    old_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    seq_index: torch.Tensor,
    num_seqs: int,
    level: Literal["none", "token", "sequence"] = "token",
    cap: float = 2.0,
    mask_low: float | None = None,
    mask_high: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (weight, keep) per token, both detached.

    token:    w_t = min(exp(old_t - mu_t), cap)
    sequence: w_t = min(exp(sum_{t' in seq} (old_t' - mu_t')), cap) for every t of the sequence
    keep_t = 0 where the (untruncated) ratio at the same level is < mask_low or > mask_high.
    """
    log_ratio = (old_logp - behaviour_logp).detach()
    if level == "sequence":
        seq_log = torch.zeros(num_seqs, dtype=log_ratio.dtype, device=log_ratio.device)
        seq_log.index_add_(0, seq_index, log_ratio)
        log_ratio = seq_log[seq_index]
    ratio = torch.exp(log_ratio)
    keep = torch.ones_like(ratio, dtype=torch.bool)
    if mask_low is not None:
        keep &= ratio >= mask_low
    if mask_high is not None:
        keep &= ratio <= mask_high
    weight = torch.ones_like(ratio) if level == "none" else ratio.clamp(max=cap)
    return weight, keep


def mismatch_kl_sums(old_logp: torch.Tensor, behaviour_logp: torch.Tensor) -> tuple[float, float]:
    """Sums of the k3 and k1 estimates of the train/inference mismatch KL(mu || pi_old) over tokens sampled
    from mu: divided by the step's token count, the `mismatch_kl` and `mismatch_kl_k1` the trainer reports."""
    d = (old_logp - behaviour_logp).detach().double()  # log(pi_old / mu)
    return float((torch.exp(d) - d - 1).sum()), float((-d).sum())
