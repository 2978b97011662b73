"""The asynchronous rollout -> store -> trainer pipeline, with the staleness bound.

A producer keeps starting groups (n episodes of one task) while the staleness budget allows:
at policy version v, no more than (max_staleness + 1) * batch_groups groups may be running,
waiting in the store or taken by the current step. The budget of a step is released only
when its new weights are published, so with max_staleness = 0 rollout and training alternate
(the synchronous baseline) and with 1 the next batch is sampled while the trainer works.
Every finished group is committed to the store before it can be taken; `next_batch` hands
the trainer the oldest complete groups, drops any that lag more than max_staleness versions
(refilled, never trained on), and mixes in replayed groups at the configured ratio.
The run's counts (groups by outcome, failures, retries) are the store's: nothing here counts.
"""

import asyncio
import contextlib
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from temper.agent.runner import sample_seed
from temper.errors import TemperError
from temper.orchestrator.backends.protocol import Attempt, Backend, BackendExhausted
from temper.orchestrator.config import OrchestratorConfig
from temper.orchestrator.faults import with_retries
from temper.orchestrator.replay import ReplayBuffer
from temper.orchestrator.scheduler import ScheduledGroup, TaskScheduler
from temper.orchestrator.store import Store
from temper.trajectory import FailureKind, Trajectory


@dataclass
class Group:
    id: str
    trajectories: list[Trajectory]
    ordinal: int = -1  # the run's group counter when it started (-1: from the store, a resumed run's backlog)

    def staleness(self, version: int) -> int:
        vs = [t.min_version() for t in self.trajectories if t.trainable and t.min_version() >= 0]
        return max(0, version - min(vs)) if vs else 0

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.trajectories if t.trainable]


@dataclass
class Batch:
    groups: list[Group]
    replayed: list[Group]
    staleness: list[int]
    wait_s: float

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for g in [*self.groups, *self.replayed] for t in g.trajectories]


class Pipeline:
    def __init__(self, cfg: OrchestratorConfig, backend: Backend, scheduler: TaskScheduler, store: Store,
                 version: int = 0, backlog: list[Group] | None = None, seed: int = 0, refill: bool = True):
        """`refill`: replace zero-variance groups (the trainer drops them: RLConfig.drops_zero_variance)."""
        self.cfg, self.backend, self.scheduler, self.store = cfg, backend, scheduler, store
        self.refill = refill
        self.version = version
        self.ready: deque[Group] = deque(backlog or [])  # committed, not yet taken
        self.running = 0  # groups in flight
        self.taken = 0  # groups taken since the last publish (their budget is still in use)
        # Zero-variance groups that may still be dropped and replaced (dynamic sampling). The groups produced
        # under one policy version fill up to max_staleness + 1 future batches, so the credit covers that many
        # batches' max_refills; each published step adds one batch's worth back. (A per-step counter reset at
        # every publish, as before, let an asynchronous run spend one batch's refills on s + 1 batches: its
        # first batches were all zero-variance groups, which the trainer drops: measured in async_bench.)
        self.refill_credit = self._refill_cap()
        self.low_running = 0  # lower-priority (evaluation) episodes running
        self.replay = ReplayBuffer(cfg.replay, random.Random(seed)) if cfg.replay.enabled else None
        self.changed = asyncio.Condition()
        self.tasks: set[asyncio.Task] = set()
        # Groups are numbered in start order, over the run's processes: the number picks the worker (round
        # robin) and seeds the episodes (run seed, task, number, episode), so a run's samples do not hang on
        # the order its requests reach an engine (or which engine), and a resumed run goes on from where it
        # stopped instead of redrawing its first groups' samples.
        self.seed, self.ordinal = seed, store.groups_started()
        self.producer: asyncio.Task | None = None
        self.error: BaseException | None = None
        self.stopped = False  # training rollouts are over: lower-priority work no longer yields

    # ---- producer --------------------------------------------------------------------------
    def _refill_cap(self) -> int:
        return self.cfg.max_refills * (self.cfg.max_staleness + 1)

    def budget_left(self) -> int:
        return (self.cfg.max_staleness + 1) * self.cfg.batch_groups - (self.running + len(self.ready) + self.taken)

    def rollouts_idle(self) -> bool:
        """No episode is running and none can start before the next publish (the staleness budget is spent):
        the trainer's step may take every core (temper/cores.py)."""
        return self.running == 0 and self.low_running == 0 and self.budget_left() <= 0

    def start(self) -> None:
        self.producer = asyncio.create_task(self._produce())

    async def _produce(self) -> None:
        try:
            while True:
                async with self.changed:
                    sched = None
                    while True:
                        if self.budget_left() > 0 and self._episodes_free():
                            sched = self.scheduler.next(self.cfg.group_size)
                            if sched is not None:
                                break
                        await self.changed.wait()
                    self.running += 1
                t = asyncio.create_task(self._run_group(sched))
                self.tasks.add(t)
                t.add_done_callback(self.tasks.discard)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a bug in the producer must stop the run, not hang it
            self.error = exc
            async with self.changed:
                self.changed.notify_all()

    def _episodes_free(self) -> bool:
        busy = self.running * self.cfg.group_size + self.low_running
        return busy + self.cfg.group_size <= max(self.cfg.concurrency, self.cfg.group_size)

    async def _run_group(self, sched: ScheduledGroup) -> None:
        """One group, in three steps: run its episodes, classify it, commit it."""
        n, self.ordinal = self.ordinal, self.ordinal + 1  # taken before any await: in start order
        worker = n % self.backend.num_workers
        task, gid = sched.task, f"{sched.task.id}-{uuid.uuid4().hex[:8]}"
        draw = f"{task.id}#{n}"
        await asyncio.to_thread(self.store.start_group, gid, task.id, task.domain, self.cfg.group_size)
        try:
            results = await self._run_episodes(sched, gid, worker, draw)
        except BackendExhausted as exc:  # stop the run; the store keeps this group unfinished (resume redoes it)
            async with self.changed:
                self.error = self.error or exc
                self.changed.notify_all()
            return
        group = Group(gid, [self._one(r, task.id, gid, k) for k, r in enumerate(results)], n)
        status = await self._classify(sched, group, results)
        await self._commit(sched, group, status, [r.attempts for r in results])

    async def _run_episodes(self, sched: ScheduledGroup, gid: str, worker: int, draw: str) -> list[Attempt]:
        """The group's n episodes on one worker, each retried (with its seed) on infrastructure failures."""
        def episode(k: int) -> Callable[[int], Awaitable[Attempt]]:
            seed = sample_seed(self.seed, draw, k)
            return lambda _try: self.backend.run_episode(worker, sched.suite_index, sched.task.id, gid, k, seed=seed)

        return list(await asyncio.gather(*(with_retries(episode(k), self.cfg.retry)
                                           for k in range(self.cfg.group_size))))

    async def _classify(self, sched: ScheduledGroup, group: Group, results: list[Attempt]) -> str:
        """complete; filtered (zero variance, while refills are on: replaced, up to max_refills per trained batch);
        failed (no trainable episode). An episode out of retries quarantines its task on the way."""
        bad = next((r for r in results if r.failure is not None), None)
        if bad is not None:  # report it; its episodes carry no loss
            task = sched.task
            self.scheduler.quarantine(task.id)
            await asyncio.to_thread(self.store.quarantine, task.id, task.domain, bad.failure.value, bad.attempts,
                                    bad.message)
            if self.scheduler.exhausted() and self.error is None:  # one bad task never stops a run; all of them do
                self.error = TemperError(f"every training task is quarantined after infrastructure failures; "
                                         f"last: task {task.id}: {bad.failure.value}: {bad.message}")
        rewards = group.rewards
        if not rewards:
            return "failed"
        if self.refill and len(set(rewards)) == 1 and self.refill_credit > 0:
            return "filtered"
        return "complete"

    async def _commit(self, sched: ScheduledGroup, group: Group, status: str, attempts: list[int]) -> None:
        """Write the group to the store, then hand it over (complete) or count a refill (filtered),
        and give its suite slots back. The write is seen through even if stop() cancels this task
        meanwhile: the store, which the run's counts come from, never misses a finished group."""
        write = asyncio.ensure_future(
            asyncio.to_thread(self.store.finish_group, group.id, group.trajectories, status, attempts))
        try:
            await asyncio.shield(write)
        finally:
            if not write.done():
                await write
        self.scheduler.release(sched, group.rewards or None)
        async with self.changed:
            self.running -= 1
            if status == "complete":
                self.ready.append(group)
            elif status == "filtered":
                self.refill_credit -= 1
            self.changed.notify_all()

    @staticmethod
    def _one(r: Attempt, task_id: str, gid: str, k: int) -> Trajectory:
        """The episode's trajectory; a stand-in carrying the failure when the worker produced none.
        Its failed tries go with it into the store (the run's failure counts come from there)."""
        if r.trajectories:
            t = r.trajectories[0]
            if r.failure is not None:
                t.failure = r.failure
            t.group_id, t.id = gid, f"{gid}/{k}"
        else:
            t = Trajectory([], [], [], [], task_id=task_id, group_id=gid, id=f"{gid}/{k}",
                           failure=r.failure or FailureKind.WORKER_ERROR, info={"error": r.message})
        if r.failed_tries:
            t.info["failed_tries"] = r.failed_tries
        return t

    # ---- consumer --------------------------------------------------------------------------
    async def next_batch(self) -> Batch:
        """The oldest complete groups within the staleness bound, plus replayed ones."""
        start = time.monotonic()
        n_replay = self.replay.draw_count(self.cfg.batch_groups) if self.replay is not None else 0
        want = self.cfg.batch_groups - n_replay
        taken: list[Group] = []
        stale: list[str] = []
        async with self.changed:
            while len(taken) < want:
                if self.error is not None:
                    raise self.error
                if not self.ready:
                    await self.changed.wait()
                    continue
                g = self.ready.popleft()
                if g.staleness(self.version) > self.cfg.max_staleness:
                    stale.append(g.id)  # never trained on; its budget goes to a refill
                    continue
                taken.append(g)
                self.taken += 1
            self.changed.notify_all()
        if stale:
            await asyncio.to_thread(self.store.mark_stale, stale)
        # in the order the groups started, not the order they finished: the trainer's sums over the batch round
        # alike whatever the timing (Adam turns a gradient that is rounding noise into a full step either way)
        taken.sort(key=lambda g: g.ordinal)
        replayed = self.replay.draw(n_replay) if self.replay is not None else []
        st = [g.staleness(self.version) for g in taken]  # fresh data only: replay is off-policy by design
        return Batch(taken, replayed, st, time.monotonic() - start)

    async def published(self, version: int, batch: Batch) -> None:
        """New weights are live: release the finished step's staleness budget."""
        if self.replay is not None:
            for g in batch.groups:
                self.replay.offer(g)
        async with self.changed:
            self.version, self.taken = version, 0
            self.refill_credit = min(self.refill_credit + self.cfg.max_refills, self._refill_cap())
            self.changed.notify_all()

    @contextlib.asynccontextmanager
    async def low_priority(self) -> AsyncIterator[None]:
        """A slot for a lower-priority episode (evaluation during training): granted only while the
        producer cannot start a training group (staleness budget spent) and episodes are free, and
        given back at once; training rollouts never wait for it."""
        async with self.changed:
            await self.changed.wait_for(lambda: self.stopped or (
                self.budget_left() <= 0 and self.low_running < self.cfg.group_size and self._episodes_free()))
            self.low_running += 1
        try:
            yield
        finally:
            async with self.changed:
                self.low_running -= 1
                self.changed.notify_all()

    async def stop(self) -> None:
        async with self.changed:
            self.stopped = True
            self.changed.notify_all()
        if self.producer is not None:
            self.producer.cancel()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*([self.producer] if self.producer else []), *self.tasks, return_exceptions=True)
