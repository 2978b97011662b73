"""Prioritised replay: a bounded buffer of past high-signal groups mixed into batches.

A group's signal is the mean |r - mean(r)| of its rewards (how much its advantages can teach);
groups below `min_signal` are not kept, and when the buffer is full the weakest goes. Drawn
groups are sampled in proportion to their signal. Replayed trajectories keep their behaviour
logprobs and versions, so the trainer's off-policy correction treats them like any stale data.
"""

import random
from typing import Any

from temper.orchestrator.config import ReplayConfig


def signal(rewards: list[float]) -> float:
    if len(rewards) < 2:
        return 0.0
    m = sum(rewards) / len(rewards)
    return sum(abs(r - m) for r in rewards) / len(rewards)


class ReplayBuffer:
    def __init__(self, cfg: ReplayConfig, rng: random.Random):
        self.cfg, self.rng = cfg, rng
        self.items: list[tuple[float, Any]] = []  # (signal, group)

    def __len__(self) -> int:
        return len(self.items)

    def offer(self, group: Any) -> None:
        s = signal(group.rewards)
        if s < self.cfg.min_signal:
            return
        self.items.append((s, group))
        if len(self.items) > self.cfg.capacity:
            self.items.remove(min(self.items, key=lambda x: x[0]))

    def draw_count(self, batch_groups: int) -> int:
        k = round(self.cfg.ratio * batch_groups)
        return k if len(self.items) >= k else 0

    def draw(self, k: int) -> list[Any]:
        if k <= 0 or not self.items:
            return []
        picked = self.rng.choices(self.items, weights=[s for s, _ in self.items], k=k)
        return [g for _, g in picked]
