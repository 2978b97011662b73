"""A reward: a scalar, its named components, and whether the harness (not the agent) failed."""

from dataclasses import dataclass, field
from typing import Any

from temper.trajectory import FailureKind


@dataclass
class Reward:
    value: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    # Set when the episode failed for infrastructure reasons; `value` is then meaningless
    # and the trainer masks the episode out (it is never a reward of 0).
    failure: FailureKind | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def infra(cls, kind: FailureKind, why: str) -> "Reward":
        return cls(value=0.0, failure=kind, info={"error": why})

    @classmethod
    def coerce(cls, x: "Reward | float | int | bool | dict[str, Any]") -> "Reward":
        """Accept what a user reward function may return: a number, a dict of components
        (its `reward` key, else their mean, is the value), or a Reward."""
        if isinstance(x, Reward):
            return x
        if isinstance(x, bool | int | float):
            return cls(value=float(x))
        if isinstance(x, dict):
            comps = {k: float(v) for k, v in x.items() if isinstance(v, bool | int | float)}
            if "reward" in comps:
                value = comps.pop("reward")
            else:
                value = sum(comps.values()) / len(comps) if comps else 0.0
            return cls(value=value, components=comps)
        raise TypeError(f"a reward must be a number, a dict or a Reward, not {type(x).__name__}")
