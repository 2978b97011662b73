"""What a trainer step measured: running sums over its micro-batches, then the figures it reports; `as_metrics()`
flattens them into the dict `temper train` logs as `trainer/<key>` columns of metrics.jsonl."""

import time
from dataclasses import asdict, dataclass, fields

import torch

from temper.rl import distributed as dist
from temper.rl.filtering import FilterStats


@dataclass
class UpdateStats:
    """A step's optimizer updates: loss and gradient norm are means over updates, the rest over kept loss tokens."""

    loss: float
    grad_norm: float
    entropy: float
    clip_frac_high: float
    clip_frac_low: float
    clip_frac_dual: float
    kl: float
    lr: float
    tokens: float  # every real token forwarded, prompts and observations included
    tokens_per_s: float
    mismatch_kl: float | None = None  # k3 estimate of KL(mu || pi_old) on the sampled tokens (RL only)
    mismatch_kl_k1: float | None = None
    is_masked_frac: float | None = None
    # mean |log pi_old - log mu| over the tokens sampled by the current weights (staleness 0): how far the
    # rollout server's logprobs are from the trainer's own on the same weights (None: no such token)
    mean_abs_logprob_mismatch: float | None = None
    value_loss: float | None = None  # gae only
    lr_scale: float | None = None  # the factor optim.staleness_lr put on this step's lr (when not "none")

    def as_metrics(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Sums:
    """Running sums over one step's micro-batches on this rank; `finish` adds the other ranks' and divides."""

    loss: float = 0.0
    grad_norm: float = 0.0
    updates: float = 0.0
    loss_tokens: float = 0.0  # kept loss tokens: the denominator of the per-token means
    forwarded: float = 0.0  # real tokens forwarded
    entropy: float = 0.0
    clipped_high: float = 0.0
    clipped_low: float = 0.0
    clipped_dual: float = 0.0
    kl: float = 0.0
    value_loss: float = 0.0
    mismatch_k3: float = 0.0
    mismatch_k1: float = 0.0
    mismatch_tokens: float = 0.0
    is_masked: float = 0.0
    fresh_abs_diff: float = 0.0  # sum of |log pi_old - log mu| over staleness-0 tokens
    fresh_tokens: float = 0.0

    def finish(self, lr: float, start: float, value_loss: bool = False) -> UpdateStats:
        s = self
        if dist.is_distributed():  # gradient norm is already global; everything else is summed over ranks
            names = [f.name for f in fields(self)]
            t = dist.all_reduce_sum(torch.tensor([getattr(self, k) for k in names], dtype=torch.float64))
            s = Sums(**dict(zip(names, t.tolist(), strict=True)))
            s.grad_norm /= dist.world_size()
            s.updates /= dist.world_size()
        n, updates = max(s.loss_tokens, 1.0), max(s.updates, 1.0)
        out = UpdateStats(
            loss=s.loss / updates, grad_norm=s.grad_norm / updates, entropy=s.entropy / n,
            clip_frac_high=s.clipped_high / n, clip_frac_low=s.clipped_low / n, clip_frac_dual=s.clipped_dual / n,
            kl=s.kl / n, lr=lr, tokens=s.forwarded, tokens_per_s=s.forwarded / max(time.perf_counter() - start, 1e-9),
            value_loss=s.value_loss / n if value_loss else None)
        if s.mismatch_tokens:
            out.mismatch_kl, out.mismatch_kl_k1 = s.mismatch_k3 / s.mismatch_tokens, s.mismatch_k1 / s.mismatch_tokens
            out.is_masked_frac = s.is_masked / s.mismatch_tokens
        if s.fresh_tokens:
            out.mean_abs_logprob_mismatch = s.fresh_abs_diff / s.fresh_tokens
        return out


@dataclass
class StepStats:
    """One RL step: what was filtered, the advantages, and the update (None: nothing left to train, skipped)."""

    policy_version: int  # after the step
    reward_mean: float  # over every healthy trajectory, before filtering
    staleness_mean: float  # policy version minus the oldest version of a trajectory's tokens
    staleness_max: int
    filter: FilterStats
    update: UpdateStats | None = None
    adv_mean: float = 0.0
    adv_std: float = 0.0
    adv_min: float = 0.0
    adv_max: float = 0.0
    truncated: int = 0  # trained samples cut to trainer.max_sequence_tokens
    truncated_tokens: int = 0  # the tokens cut from them
    context_split: int = 0  # trained samples split across a context-parallel group's ranks

    @property
    def skipped(self) -> bool:
        return self.update is None

    def as_metrics(self) -> dict[str, float]:
        m = {"reward_mean": self.reward_mean, **asdict(self.filter), "staleness_mean": self.staleness_mean,
             "staleness_max": self.staleness_max, "truncated": self.truncated,
             "truncated_tokens": self.truncated_tokens, "context_split": self.context_split}
        if self.update is None:
            m["skipped"] = 1.0
        else:
            m.update(adv_mean=self.adv_mean, adv_std=self.adv_std, adv_min=self.adv_min, adv_max=self.adv_max,
                     **self.update.as_metrics())
        return {**{k: float(v) for k, v in m.items()}, "policy_version": float(self.policy_version)}
