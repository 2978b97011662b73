"""The task scheduler: which task's group starts next.

Suites get new groups in proportion to their weights (the one furthest below its share goes
next; priority breaks ties), never more episodes in flight than their `max_concurrency` (their
sandbox capacity). Within a suite, tasks come in a seeded shuffled order, epoch after epoch,
skipping tasks that are held out for evaluation, quarantined, or retired/parked by the
curriculum: a task whose observed pass rate reached `retire_above` is too easy (retired), one
at or below `park_below` after `min_groups` groups is hopeless for now (parked; parked tasks
come back when a suite runs out of others). The rest fall into easy / medium / hard pools.

`next` runs once per group started. Rather than computing every suite's deficit (~100 us a
decision over 200 suites, measured by benchmarks/scheduler_sim.py), it keeps suites of equal
share in a heap ordered by (groups started, -priority, index): within a share that order is the
deficit order, so only each heap's first free suite can be furthest below its share, and the
decision computes one deficit per distinct weight (the same floats, so the same choice).
"""

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

from temper.envs import Suite, Task
from temper.orchestrator.config import CurriculumConfig, SuiteConfig


@dataclass
class TaskStats:
    groups: int = 0
    reward_sum: float = 0.0
    episodes: int = 0

    @property
    def pass_rate(self) -> float:
        return self.reward_sum / self.episodes if self.episodes else 0.0


@dataclass
class SuiteSlot:
    cfg: SuiteConfig
    suite: Suite
    order: list[Task]
    cursor: int = 0
    started: int = 0  # groups started (for the weighted share)
    in_flight: int = 0  # episodes running now
    epoch: int = 0


@dataclass
class ScheduledGroup:
    """A group the scheduler picked: its task, its suite, and the episode slots reserved there."""

    task: Task
    suite_index: int
    episodes: int


@dataclass
class TaskScheduler:
    suites: list[SuiteSlot]
    curriculum: CurriculumConfig
    stats: dict[str, TaskStats] = field(default_factory=dict)
    retired: set[str] = field(default_factory=set)
    parked: set[str] = field(default_factory=set)
    quarantined: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, suites: list[tuple[SuiteConfig, Suite]], curriculum: CurriculumConfig, seed: int = 0,
              exclude: set[str] | None = None) -> "TaskScheduler":
        exclude = exclude or set()
        slots = []
        for i, (cfg, suite) in enumerate(suites):
            tasks = [t for t in suite.tasks() if t.id not in exclude]
            random.Random(f"{seed}-{i}-{cfg.spec}").shuffle(tasks)
            slots.append(SuiteSlot(cfg, suite, tasks))
        sched = cls(slots, curriculum)
        for _, suite in suites:  # pass rates measured before training (an envqa manifest) seed the pools
            for task_id, (passes, samples) in getattr(suite, "pass_rates", dict)().items():
                sched.stats[task_id] = TaskStats(curriculum.min_groups, float(passes), samples)
        return sched

    def __post_init__(self) -> None:
        self._task_ids = {t.id for s in self.suites for t in s.order}
        self._index()

    def _index(self) -> None:
        """The pick index: suites with tasks, grouped by their share (weight / total weight, the float the
        deficit uses), each group a heap of (started, -priority, index); full suites wait in `_held`."""
        total_w = sum(s.cfg.weight for s in self.suites)
        by_share: dict[float, list[tuple[int, int, int]]] = {}
        for i, s in enumerate(self.suites):
            if s.order:
                by_share.setdefault(s.cfg.weight / total_w, []).append((s.started, -s.cfg.priority, i))
        self._shares = list(by_share.items())
        self._heap_of = {i: h for _, h in self._shares for _, _, i in h}
        for _, h in self._shares:
            heapq.heapify(h)
        self._held: set[int] = set()  # out of the heaps: too full for `_held_for` episodes more
        self._held_for = 0
        self._total = sum(s.started for s in self.suites)

    def _unhold(self, i: int) -> None:
        self._held.discard(i)
        s = self.suites[i]
        heapq.heappush(self._heap_of[i], (s.started, -s.cfg.priority, i))

    # ---- picking ---------------------------------------------------------------------------
    def next(self, episodes: int) -> ScheduledGroup | None:
        """The next group's task, with `episodes` slots reserved in its suite; None when every suite
        with tasks is at its concurrency limit."""
        if episodes != self._held_for:  # held suites were full for another group size
            for i in list(self._held):
                self._unhold(i)
            self._held_for = episodes
        total, suites, best = max(1, self._total), self.suites, None
        for share, heap in self._shares:
            while heap:
                started, neg_priority, i = heap[0]
                s = suites[i]
                if started != s.started or i in self._held:  # an entry from before its last start
                    heapq.heappop(heap)
                elif s.in_flight + episodes > max(s.cfg.max_concurrency, episodes):
                    heapq.heappop(heap)
                    self._held.add(i)
                else:
                    break
            else:
                continue
            # furthest below its weighted share first; then the higher priority; then the lower index
            key = (started / total - share, neg_priority, i)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        i = best[2]
        slot = self.suites[i]
        task = self._take(slot)
        if task is None:
            return None
        slot.started += 1
        slot.in_flight += episodes
        self._total += 1
        heapq.heappush(self._heap_of[i], (slot.started, best[1], i))
        return ScheduledGroup(task, i, episodes)

    def _take(self, slot: SuiteSlot) -> Task | None:
        for _ in range(2 * len(slot.order) + 1):
            if slot.cursor >= len(slot.order):
                slot.cursor, slot.epoch = 0, slot.epoch + 1
                skipped = self.retired | self.parked | self.quarantined
                if all(t.id in skipped for t in slot.order):
                    self.parked -= {t.id for t in slot.order}  # nothing else left: give parked tasks another go
            task = slot.order[slot.cursor]
            slot.cursor += 1
            if task.id not in self.retired and task.id not in self.parked and task.id not in self.quarantined:
                return task
        return None

    # ---- feedback --------------------------------------------------------------------------
    def release(self, s: ScheduledGroup, rewards: list[float] | None) -> None:
        """The group finished (rewards of its trainable episodes) or was abandoned (None)."""
        self.suites[s.suite_index].in_flight -= s.episodes
        if s.suite_index in self._held:  # room again
            self._unhold(s.suite_index)
        if rewards:
            st = self.stats.setdefault(s.task.id, TaskStats())
            st.groups += 1
            st.episodes += len(rewards)
            st.reward_sum += sum(rewards)
            c = self.curriculum
            if c.enabled and st.groups >= c.min_groups:
                if st.pass_rate >= c.retire_above:
                    self.retired.add(s.task.id)
                elif st.pass_rate <= c.park_below:
                    self.parked.add(s.task.id)

    def quarantine(self, task_id: str) -> None:
        self.quarantined.add(task_id)

    def exhausted(self) -> bool:
        """Every task of every suite is quarantined: nothing can run any more."""
        return self._task_ids <= self.quarantined  # one set test: it runs after every quarantine

    def pools(self) -> dict[str, int]:
        c, counts = self.curriculum, {"new": 0, "hard": 0, "medium": 0, "easy": 0}
        for slot in self.suites:
            for t in slot.order:
                st = self.stats.get(t.id)
                if t.id in self.retired or t.id in self.parked or t.id in self.quarantined:
                    continue
                if st is None or st.groups < c.min_groups:
                    counts["new"] += 1
                else:
                    pool = "hard" if st.pass_rate < c.hard_below else "easy" if st.pass_rate >= c.easy_above \
                        else "medium"
                    counts[pool] += 1
        return {**counts, "retired": len(self.retired), "parked": len(self.parked),
                "quarantined": len(self.quarantined)}

    # ---- resume ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"cursors": [(s.cursor, s.started, s.epoch) for s in self.suites],
                "stats": {k: (v.groups, v.reward_sum, v.episodes) for k, v in self.stats.items()},
                "retired": sorted(self.retired), "parked": sorted(self.parked),
                "quarantined": sorted(self.quarantined)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for slot, (cursor, started, epoch) in zip(self.suites, state["cursors"], strict=False):
            slot.cursor, slot.started, slot.epoch = cursor, started, epoch
        self._index()
        self.stats = {k: TaskStats(*v) for k, v in state["stats"].items()}
        self.retired, self.parked = set(state["retired"]), set(state["parked"])
        self.quarantined = set(state["quarantined"])
