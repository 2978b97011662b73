"""The episode page's advantage, from the group's stored rewards: a non-finite one (a store written before
rewards had to be finite) has none, and the rest of its group still has theirs."""

import math

from temper.dashboard.episode_view import advantage


def _group(*rewards: float | None) -> list[dict]:
    return [{"id": f"e{i}", "reward": r, "failure": None} for i, r in enumerate(rewards)]


def test_a_nan_reward_in_the_group_has_no_advantage_and_spoils_no_other() -> None:
    group = _group(1.0, math.nan, 0.0)
    assert advantage({}, group, "e1") is None
    a0, a2 = advantage({}, group, "e0"), advantage({}, group, "e2")
    assert math.isfinite(a0) and math.isfinite(a2) and a0 > 0 > a2
    assert (a0, a2) == (advantage({}, _group(1.0, 0.0), "e0"), advantage({}, _group(1.0, 0.0), "e1"))
