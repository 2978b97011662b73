"""Which trajectories train, and with which reward: failures, overlong responses, dynamic sampling."""

from dataclasses import dataclass

from temper.rl.advantages import group_indices
from temper.rl.config import FilterConfig
from temper.trajectory import Trajectory


def overlong_penalty(length: int, max_len: int, buffer: int, penalty: float = 1.0) -> float:
    """DAPO soft overlong punishment, added to the reward.

    0 if L <= L_max - L_cache;  -penalty * (L - (L_max - L_cache)) / L_cache inside the buffer;
    -penalty beyond L_max.
    """
    start = max_len - buffer
    if length <= start:
        return 0.0
    if length > max_len or buffer <= 0:
        return -penalty
    return -penalty * (length - start) / buffer


@dataclass
class FilterStats:
    dropped_failed: int  # infrastructure failures: no reward, no loss, in no baseline
    dropped_groups: int  # dynamic sampling: groups whose rewards are all equal
    masked_overlong: int
    kept_trajectories: int


@dataclass
class Filtered:
    trajectories: list[Trajectory]
    rewards: list[float]  # after shaping
    groups: list[list[int]]  # indices into `trajectories`
    # False: kept for its group's baseline but carries no loss (masked overlong; a segment an external
    # program sampled under a constraint, info.constrained: docs/agents.md)
    train: list[bool]
    stats: FilterStats


def filter_trajectories(trajectories: list[Trajectory], cfg: FilterConfig, group_based: bool = True) -> Filtered:
    """`group_based`: the estimator compares within groups (GRPO, RLOO), so equal rewards teach nothing;
    REINFORCE and GAE learn from a single trajectory, and dynamic sampling does not apply to them."""
    # Infrastructure failures are not the policy's fault: no reward, no loss, not in any baseline.
    ok = [t for t in trajectories if t.trainable]
    rewards = [t.reward for t in ok]
    train = [True] * len(ok)
    for i, t in enumerate(ok):
        if cfg.overlong == "penalty":
            rewards[i] += overlong_penalty(t.num_model_tokens, cfg.max_response_tokens, cfg.overlong_buffer,
                                           cfg.overlong_penalty)
        elif cfg.overlong == "mask" and t.truncated:
            train[i] = False
        if t.info.get("constrained"):  # sampled under a grammar: its logprobs are not the policy's
            train[i] = False

    kept: list[int] = []
    groups: list[list[int]] = []
    dropped_groups = 0
    for idx in group_indices([t.group_id for t in ok]):
        values = [rewards[i] for i in idx]
        if group_based and cfg.drop_zero_variance and max(values) == min(values):
            dropped_groups += 1
            continue
        groups.append(list(range(len(kept), len(kept) + len(idx))))
        kept.extend(idx)
    masked_overlong = sum(not train[i] and not ok[i].info.get("constrained") for i in kept)
    stats = FilterStats(len(trajectories) - len(ok), dropped_groups, masked_overlong, len(kept))
    return Filtered([ok[i] for i in kept], [rewards[i] for i in kept], groups, [train[i] for i in kept], stats)
