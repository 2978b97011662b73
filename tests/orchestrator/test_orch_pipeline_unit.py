"""`Pipeline` on its own, in milliseconds: a small in-process backend (episodes return at once, or
when the test lets them), a real `TaskScheduler` and a real `Store`. It shows the staleness bound,
the refills of dynamic sampling and the low-priority gate step by step."""

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path

from temper.envs.suites.arithmetic import ToySuite
from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.config import CurriculumConfig, OrchestratorConfig, SuiteConfig
from temper.orchestrator.pipeline import Pipeline
from temper.orchestrator.scheduler import TaskScheduler
from temper.orchestrator.store import Store
from temper.trajectory import FailureKind, Trajectory


class EpisodeBackend:
    """A Backend in this process: an episode is one model token sampled with the weights live when
    it starts (`version`), scored `rewards(group_number, index)`; it returns once `release` is set."""

    num_workers = 1

    def __init__(self, rewards: Callable[[int, int], float] = lambda g, k: float(k == 0), hold: bool = False):
        self.rewards, self.version, self.started = rewards, 0, 0
        self.groups: list[str] = []  # group ids in the order their first episode started
        self.seeds: dict[tuple[str, int], int | None] = {}  # (group id, episode index) -> its sampling seed
        self.release = asyncio.Event()
        if not hold:
            self.release.set()

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        self.started += 1
        self.seeds[(group_id, index)] = seed
        if group_id not in self.groups:
            self.groups.append(group_id)
        version = self.version
        await self.release.wait()
        reward = self.rewards(self.groups.index(group_id), index)
        return Attempt([Trajectory([5, 6], [0, 1], [0.0, -0.7], [-1, version], reward=reward, task_id=task_id)], 1)

    async def push_weights(self, state: dict, version: int) -> None:
        self.version = version

    def counters(self) -> dict[str, float]:
        return {"episodes": float(self.started)}

    def close(self) -> None:
        pass


def pipeline(tmp_path: Path, backend: EpisodeBackend, refill: bool = True, **cfg: object) -> Pipeline:
    scheduler = TaskScheduler.build([(SuiteConfig(spec="toy", max_concurrency=64), ToySuite(n=64))],
                                    CurriculumConfig(enabled=False))
    orch = OrchestratorConfig.model_validate({"group_size": 2, "concurrency": 64, **cfg})
    return Pipeline(orch, backend, scheduler, Store(tmp_path / "store.sqlite"), refill=refill)


def run(main: Callable[[], Coroutine[None, None, None]]) -> None:
    """Each test is one asyncio program of well under a second; a broken mechanism fails, never hangs."""
    asyncio.run(asyncio.wait_for(main(), 2))


async def until(cond: Callable[[], bool]) -> None:
    """Wait for the pipeline to reach `cond`, then let it run on a little: it must not go further."""
    async with asyncio.timeout(1):
        while not cond():
            await asyncio.sleep(0.002)
    await asyncio.sleep(0.02)


def test_staleness_bound_holds_groups_and_drops_lagging_ones(tmp_path: Path) -> None:
    async def main() -> None:
        backend = EpisodeBackend(hold=True)
        pipe = pipeline(tmp_path, backend, max_staleness=1, batch_groups=2, refill=False)
        pipe.start()
        await until(lambda: backend.started == 8)
        assert (pipe.running, backend.started) == (4, 8)  # (max_staleness + 1) * batch_groups groups, no more
        backend.release.set()
        await until(lambda: len(pipe.ready) == 4)
        assert (pipe.running, pipe.budget_left(), backend.started) == (0, 0, 8)  # finished, still holding budget
        batch = await pipe.next_batch()
        await until(lambda: True)
        assert (batch.staleness, pipe.taken, backend.started) == ([0, 0], 2, 8)  # taken: held until published

        # The trainer publishes version 2: the two groups still waiting (version 0) lag 2 > max_staleness.
        old = [g.id for g in pipe.ready]
        await backend.push_weights({}, 2)
        await pipe.published(2, batch)
        await until(lambda: len(pipe.ready) == 4)  # the freed budget of the step: two groups at version 2
        batch = await pipe.next_batch()
        assert batch.staleness == [0, 0] and not {g.id for g in batch.groups} & set(old)
        await until(lambda: backend.started == 2 * (4 + 2 + 2) and len(pipe.ready) == 2)  # two refills
        assert (pipe.running, pipe.taken, pipe.budget_left()) == (0, 2, 0)
        assert {g: [t.min_version() for t in pipe.store.group(g)] for g in old} == {old[0]: [0, 0], old[1]: [0, 0]}
        assert pipe.store.counts() == {"complete": 12, "stale": 4}  # never trained on, kept as stale
        assert pipe.store.group_counts()["groups_stale"] == 2
        await pipe.stop()

    run(main)


def test_dynamic_sampling_refills_zero_variance_groups_up_to_max_refills(tmp_path: Path) -> None:
    async def main() -> None:
        # groups 0, 1, 2, 3 all rewarded 1.0 (no signal), group 4 mixed; one group a step, one at a time
        backend = EpisodeBackend(rewards=lambda g, k: 1.0 if g < 4 else float(k == 0))
        pipe = pipeline(tmp_path, backend, max_staleness=0, batch_groups=1, max_refills=2)
        pipe.start()
        first = await pipe.next_batch()
        assert [g.id for g in first.groups] == [backend.groups[2]]  # 0 and 1 filtered; the third trained anyway
        assert first.groups[0].rewards == [1.0, 1.0]
        await backend.push_weights({}, 1)
        await pipe.published(1, first)  # a new step: its refills count from 0 again
        second = await pipe.next_batch()
        assert [g.id for g in second.groups] == [backend.groups[4]] and second.groups[0].rewards == [1.0, 0.0]
        counts = pipe.store.group_counts()
        assert (counts["groups_filtered"], counts["groups_completed"], counts["groups_started"]) == (3, 2, 5)
        await pipe.stop()

    run(main)


def test_an_asynchronous_window_has_refills_for_every_batch_it_fills(tmp_path: Path) -> None:
    """At max_staleness 1 the groups started under version 0 fill two batches: the credit covers both
    batches' refills (4 = 2 x max_refills), so neither batch is a zero-variance group. (With the old
    per-step counter the second batch got group 2, all 1.0, which the trainer drops: async_bench.)"""
    async def main() -> None:
        backend = EpisodeBackend(rewards=lambda g, k: 1.0 if g < 4 else float(k == 0))
        pipe = pipeline(tmp_path, backend, max_staleness=1, batch_groups=1, max_refills=2)
        pipe.start()
        first = await pipe.next_batch()
        await until(lambda: pipe.budget_left() == 0 and pipe.running == 0)  # the next batch is ready
        assert first.groups[0].rewards == [1.0, 0.0] and pipe.refill_credit == 0
        assert pipe.store.group_counts()["groups_filtered"] == 4
        await backend.push_weights({}, 1)
        await pipe.published(1, first)
        assert pipe.refill_credit == 2  # one batch's worth back, never more than the cap of two batches
        second = await pipe.next_batch()
        assert second.groups[0].rewards == [1.0, 0.0]
        await pipe.stop()

    run(main)


def test_low_priority_runs_only_in_spent_budget_and_training_never_waits(tmp_path: Path) -> None:
    async def main() -> None:
        backend = EpisodeBackend(hold=True)
        pipe = pipeline(tmp_path, backend, max_staleness=0, batch_groups=1, concurrency=4)
        granted, evaluated = asyncio.Event(), asyncio.Event()

        async def evaluation_episode() -> None:
            async with pipe.low_priority():
                granted.set()
                await evaluated.wait()

        low = asyncio.create_task(evaluation_episode())
        await until(lambda: True)
        assert not granted.is_set() and pipe.budget_left() == 1  # a training group could start: it goes first
        pipe.start()
        backend.release.set()
        await until(granted.is_set)  # the group waits to be trained on: budget spent, the idle slot is lent
        assert (len(pipe.ready), pipe.budget_left(), pipe.low_running, backend.started) == (1, 0, 1, 2)
        batch = await pipe.next_batch()
        await backend.push_weights({}, 1)
        await pipe.published(1, batch)
        await until(lambda: backend.started == 4)  # the next group starts while the evaluation still runs
        assert (len(pipe.ready) + pipe.running, pipe.low_running, granted.is_set()) == (1, 1, True)
        evaluated.set()
        await low
        assert pipe.low_running == 0
        await pipe.stop()

    run(main)


def test_episode_seeds_follow_the_groups_order_in_the_run_not_the_engines(tmp_path: Path) -> None:
    """Every episode carries a seed of (run seed, task, the group's ordinal, episode): distinct within a
    group, the same in a second run (whatever order its requests reach an engine), and a pipeline on
    the same store (a resumed run) goes on from the groups already started instead of redrawing them."""
    def seeds(path: Path) -> list[tuple[str, list]]:
        async def main() -> None:
            backend = EpisodeBackend()
            pipe = pipeline(path, backend, max_staleness=0, batch_groups=2, refill=False)
            pipe.start()
            await pipe.next_batch()
            await pipe.stop()
            out.extend((g.rsplit("-", 1)[0], [backend.seeds[(g, k)] for k in (0, 1)]) for g in backend.groups)

        out: list[tuple[str, list]] = []
        run(main)
        return out

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, again = seeds(tmp_path / "a"), seeds(tmp_path / "b")
    assert first == again and len(first) >= 2
    flat = [s for _, pair in first for s in pair]
    assert None not in flat and len(set(flat)) == len(flat)  # distinct episodes, distinct samples
    resumed = seeds(tmp_path / "a")  # the same store: its groups count on from the first run's
    assert not {s for _, pair in resumed for s in pair} & set(flat)


def test_a_broken_task_is_quarantined_at_once_and_never_retried(tmp_path: Path) -> None:
    class BrokenFirstTask(EpisodeBackend):
        """The first task's verifier hangs on a clean control run too (TerminalEnv.judge_timeout): task_broken."""

        async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                              eval_mode: bool = False, seed: int | None = None) -> Attempt:
            if not self.groups or self.groups[0] == group_id:
                self.groups[:1] = [group_id]
                self.started += 1
                return Attempt([], 1, FailureKind.TASK_BROKEN, "tests/test.sh ran past 1s on a clean run too")
            return await super().run_episode(worker, suite_index, task_id, group_id, index, eval_mode, seed)

    async def main() -> None:
        backend = BrokenFirstTask()
        pipe = pipeline(tmp_path, backend, max_staleness=0, batch_groups=1, retry={"max_attempts": 3, "backoff_s": 0})
        pipe.start()
        batch = await pipe.next_batch()
        assert batch.groups and all(g.id != backend.groups[0] for g in batch.groups)
        (q,) = pipe.store.quarantined()
        assert q["kind"] == "task_broken" and q["attempts"] == 1 and "clean run" in q["message"]
        assert pipe.scheduler.quarantined == {q["task_id"]}
        await pipe.stop()

    run(main)
