"""The store: commits, consumption marks that commit with checkpoints, recovery after a crash."""

from pathlib import Path

from temper.orchestrator.store import Store
from temper.orchestrator.train import generated_per_kept
from temper.trajectory import FailureKind, Trajectory


def traj(gid: str, k: int, reward: float, failure: FailureKind | None = None) -> Trajectory:
    return Trajectory([1, 2, 3], [0, 1, 1], [0.0, -0.5, -0.5], [-1, 0, 0], reward=reward, task_id="t",
                      group_id=gid, id=f"{gid}/{k}", failure=failure)


def finish(store: Store, gid: str, rewards: list[float], failed: int = -1) -> None:
    store.start_group(gid, "t", "toy", len(rewards))
    trajs = [traj(gid, k, r, FailureKind.SANDBOX_CRASH if k == failed else None) for k, r in enumerate(rewards)]
    store.finish_group(gid, trajs, "complete", [1] * len(rewards))


def test_groups_commit_and_failures_are_kept_apart(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    finish(store, "g1", [1.0, 0.0], failed=1)
    store.start_group("g2", "t", "toy", 2)  # still in flight: not offered to the trainer
    assert store.complete_groups() == ["g1"]
    assert store.counts() == {"complete": 1, "failed": 1, "in_flight": 2}
    assert [t.failure for t in store.group("g1")] == [None, FailureKind.SANDBOX_CRASH]


def test_marks_commit_with_the_checkpoint_and_recovery_undoes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(path)
    for g in ("g1", "g2", "g3"):
        finish(store, g, [1.0, 0.0])
    store.commit_steps([(1, ["g1"], [], {"loss": 0.1})], "step_000001")
    store.start_group("g4", "t", "toy", 2)  # in flight at the crash
    store.close()
    # a crash here: step 2 trained on g2 in memory but never committed
    store = Store(path)
    assert store.last_committed_step() == (1, "step_000001")
    undone = store.recover(1)
    assert undone == {"unconsumed": 0, "dropped_in_flight": 2}
    assert store.complete_groups() == ["g2", "g3"]  # nothing lost: g2 is offered again
    assert store.consumed_per_step() == {"g1/0": [1], "g1/1": [1]}
    store.commit_steps([(2, ["g2"], [], {}), (3, ["g3"], [], {})], "step_000003")
    assert store.consumed_per_step() == {"g1/0": [1], "g1/1": [1], "g2/0": [2], "g2/1": [2], "g3/0": [3], "g3/1": [3]}


def test_quarantine_and_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.quarantine("t1", "toy", "sandbox_crash", 3, "sandbox killed")
    assert store.quarantined() == [{"task_id": "t1", "domain": "toy", "kind": "sandbox_crash", "attempts": 3,
                                    "message": "sandbox killed"}]


def test_training_counts_cover_every_process_of_the_run(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(path)
    finish(store, "g1", [1.0, 0.0], failed=1)
    retried = traj("g2", 0, 1.0)
    retried.info["failed_tries"] = ["sandbox_crash", "worker_error"]  # succeeded on its third try
    store.start_group("g2", "t", "toy", 2)
    store.finish_group("g2", [retried, traj("g2", 1, 1.0)], "filtered", [3, 1])
    finish(store, "g3", [1.0, 0.0])
    store.mark_stale(["g3"])
    store.commit_steps([(1, ["g1"], [], {"staleness_max": 2})], "step_000001")
    store.start_group("g4", "t", "toy", 2)  # in flight at a crash
    store.close()
    store = Store(path)  # the resumed process
    store.recover(1)
    finish(store, "g5", [0.0, 0.0], failed=0)
    store.start_group("g6", "t", "toy", 1)
    store.finish_group("g6", [traj("g6", 0, 0.0, FailureKind.HARNESS_TIMEOUT)], "failed", [1])
    store.start_group("g7", "t", "toy", 2)  # still running when the summary is written
    assert store.training_counts() == {
        "groups_started": 7, "groups_completed": 3, "groups_filtered": 1, "groups_stale": 1, "groups_failed": 1,
        "groups_dropped_in_flight": 1, "episodes": 9, "failed_episodes": 3, "retries": 2, "max_staleness_seen": 2,
        "failures_sandbox_crash": 1, "failures_worker_error": 1}
    assert generated_per_kept(store.training_counts()) == 2.0  # 4 groups generated (one filtered, one stale), 2 kept
