"""The local backend driven directly (no pipeline): counters summed over workers, and weights
pushed while an episode is in flight, with partial rollouts on (one sample spans two policy
versions, each token tagged and carrying its behaviour logprob) and off (the update waits)."""

import asyncio
from pathlib import Path

from temper.orchestrator.backend import LocalBackend
from temper.orchestrator.config import AgentSection, FaultConfig
from temper.orchestrator.rollout_worker import WorkerSpec, sum_counters

SUITE = "toy:n=8,seed=0,digits=2"


def backend(model: Path, partial_rollouts: bool = True, num_workers: int = 1, max_new_tokens: int = 1) -> LocalBackend:
    from temper.engine import EngineConfig

    agent = AgentSection(system_prompt="say", temperature=1.0, max_new_tokens=max_new_tokens)
    spec = WorkerSpec(agent=agent, faults=FaultConfig(), partial_rollouts=partial_rollouts, episode_timeout_s=120)
    return LocalBackend(str(model), EngineConfig(kv_budget_bytes=16_000_000, max_num_seqs=8), [SUITE], spec,
                        num_workers)


def task_ids(b: LocalBackend) -> list[str]:
    return list(b.workers[0].tasks[0])


def test_sum_counters_adds_keys_missing_from_some_workers() -> None:
    assert sum_counters([{"episodes": 2.0, "injected_x": 1.0}, {"episodes": 3.0}, {}]) == {
        "episodes": 5.0, "injected_x": 1.0}


def test_local_backend_counters_are_the_sum_over_its_workers(toy_model: Path) -> None:
    b = backend(toy_model, num_workers=2, max_new_tokens=3)
    try:
        async def run() -> None:
            tid = task_ids(b)[0]
            await asyncio.gather(b.run_episode(0, 0, tid, "g", 0), b.run_episode(1, 0, tid, "g", 1),
                                 b.run_episode(1, 0, tid, "g", 2))

        asyncio.run(run())
        per = [w.counters() for w in b.workers]
        assert [p["episodes"] for p in per] == [1.0, 2.0]
        total = b.counters()
        assert total["episodes"] == 3.0
        assert total["generated_tokens"] == per[0]["generated_tokens"] + per[1]["generated_tokens"] >= 3
    finally:
        b.close()
