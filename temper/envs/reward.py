"""A reward: a scalar, its named components, and whether the harness (not the agent) failed.

A reward is a finite number: `Reward` refuses NaN and infinities (in `value` and in every
component), since one NaN in a group makes every advantage of the group NaN. An environment
declares the range its rewards lie in (`Environment.reward_range`, [0, 1] for the built-in
suites); `in_range` turns a value outside it into the agent's 0 with `info.reward_out_of_range`.
"""

import math
from dataclasses import dataclass, field
from typing import Any

from temper.trajectory import EPISODE_INFO, SCREENSHOT, FailureKind

UNIT = (0.0, 1.0)


class RewardValueError(ValueError):
    """A reward that is not a finite number."""


def _finite(x: Any, what: str) -> float:
    if isinstance(x, bool | int | float):
        try:
            v = float(x)
        except OverflowError:  # an int too large for a float
            v = math.inf
        if math.isfinite(v):
            return v
    raise RewardValueError(f"{what} must be a finite number, not {x!r}"[:200])


@dataclass
class Reward:
    value: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    # Set when the episode failed for infrastructure reasons; `value` is then meaningless
    # and the trainer masks the episode out (it is never a reward of 0).
    failure: FailureKind | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.value = _finite(self.value, "a reward")
        self.components = {k: _finite(v, f"reward component {k!r}") for k, v in self.components.items()}

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def infra(cls, kind: FailureKind, why: str) -> "Reward":
        return cls(value=0.0, failure=kind, info={"error": why})

    @classmethod
    def coerce(cls, x: "Reward | float | int | bool | dict[str, Any]") -> "Reward":
        """Accept what a user reward function may return: a number, a dict of components
        (its `reward` key, else their mean, is the value), or a Reward. Not a finite number:
        RewardValueError (a ValueError)."""
        if isinstance(x, Reward):
            return x
        if isinstance(x, bool | int | float):
            return cls(value=x)
        if isinstance(x, dict):
            comps = {k: _finite(v, f"reward component {k!r}") for k, v in x.items()
                     if isinstance(v, bool | int | float)}
            if "reward" in comps:
                value = comps.pop("reward")
            else:
                value = sum(comps.values()) / len(comps) if comps else 0.0
            return cls(value=value, components=comps)
        raise TypeError(f"a reward must be a number, a dict or a Reward, not {type(x).__name__}")


def in_range(reward: Reward, reward_range: tuple[float, float] | None) -> Reward:
    """`reward` when its value lies in `reward_range` (None: any finite value), else the agent's 0
    with `info.reward_out_of_range` (never masked: a verifier the agent drove out of range scores 0)."""
    if reward_range is None or not reward.ok:
        return reward
    lo, hi = reward_range
    if lo <= reward.value <= hi:
        return reward
    return Reward(value=0.0, info={**reward.info, "reward_out_of_range": reward.value,
                                   "error": f"reward {reward.value!r} outside [{lo:g}, {hi:g}]"})


def episode_info(reward: Reward, last_window: bool) -> dict[str, Any]:
    """The part of `reward.info` an episode's trajectory keeps (EPISODE_INFO; the screenshot in the last window)."""
    out = {k: reward.info[k] for k in EPISODE_INFO if reward.info.get(k) is not None}
    if last_window and reward.info.get(SCREENSHOT):
        out[SCREENSHOT] = reward.info[SCREENSHOT]
    return out
