"""Advantage estimators: how much better one response was than its alternatives.

Outcome estimators (GRPO, Dr. GRPO, RLOO, REINFORCE) give one scalar per sequence, broadcast
to its model tokens; GAE gives one per token from a value head (multi-turn credit, critic.py).
"""

from collections import defaultdict
from collections.abc import Sequence

import torch

from temper.errors import TemperError
from temper.rl.config import AdvantageConfig


def group_indices(group_ids: Sequence[str]) -> list[list[int]]:
    """Indices of equal group ids, in first-seen order; an empty id is a group of its own."""
    groups: dict[str, list[int]] = defaultdict(list)
    singles: list[list[int]] = []
    for i, g in enumerate(group_ids):
        if g:
            groups[g].append(i)
        else:
            singles.append([i])
    return [*groups.values(), *singles]


def grpo(rewards: torch.Tensor, groups: list[list[int]], std_normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """A_i = (r_i - mean_g) / (std_g + eps), std unbiased (n - 1); without std, Dr. GRPO: A_i = r_i - mean_g (its
    length bias is removed by the seq_sum_norm aggregation)."""
    adv = torch.zeros_like(rewards)
    for idx in groups:
        r = rewards[idx]
        a = r - r.mean()
        if std_normalize and len(idx) > 1:
            a = a / (r.std() + eps)
        adv[idx] = a
    return adv


def rloo(rewards: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
    """A_i = r_i - mean_{j != i} r_j = n / (n - 1) * (r_i - mean_g); a group of one gets 0."""
    adv = torch.zeros_like(rewards)
    for idx in groups:
        n = len(idx)
        if n > 1:
            r = rewards[idx]
            adv[idx] = r - (r.sum() - r) / (n - 1)
    return adv


class RunningBaseline:
    """REINFORCE with an exponential moving average of past rewards as the baseline."""

    def __init__(self, decay: float = 0.9):
        self.decay = decay
        self.value: float | None = None

    def __call__(self, rewards: torch.Tensor) -> torch.Tensor:
        """A_i = r_i - b (b is the first batch's mean at the start), then b <- decay b + (1 - decay) mean(r)."""
        mean = float(rewards.mean())
        baseline = mean if self.value is None else self.value
        self.value = self.decay * baseline + (1 - self.decay) * mean
        return rewards - baseline

    def state_dict(self) -> dict:
        return {"value": self.value, "decay": self.decay}

    def load_state_dict(self, state: dict) -> None:
        self.value, self.decay = state["value"], state["decay"]


def outcome_advantages(rewards: torch.Tensor, groups: list[list[int]], cfg: AdvantageConfig,
                       baseline: RunningBaseline) -> torch.Tensor:
    """One advantage per trajectory; zero for gae, whose per-token advantages come from the critic.
    Rewards and advantages must be finite: one NaN reward would make every advantage of its group NaN
    (and the update with it), so a non-finite one stops the step with one line (rewards are checked
    where they are made, temper/envs/reward.py; this is the trainer's own guard)."""
    _finite(rewards, "reward")
    if cfg.estimator == "grpo":
        adv = grpo(rewards, groups, cfg.std_normalize, cfg.eps)
    elif cfg.estimator == "dr_grpo":
        adv = grpo(rewards, groups, std_normalize=False)
    elif cfg.estimator == "rloo":
        adv = rloo(rewards, groups)
    elif cfg.estimator == "reinforce":
        adv = baseline(rewards)
    else:
        adv = torch.zeros_like(rewards)
    return _finite(adv, "advantage")


def _finite(x: torch.Tensor, what: str) -> torch.Tensor:
    bad = (~torch.isfinite(x)).nonzero().flatten().tolist()
    if bad:
        raise TemperError(f"advantages: {len(bad)} non-finite {what}(s), e.g. {x[bad[0]].item()} at index {bad[0]}; "
                          "a reward must be a finite number")
    return x
