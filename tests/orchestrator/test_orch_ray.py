"""The Ray backend (Ray starts locally on this CPU): the tiny recipe learns with rollout workers as
Ray actors and weights through the object store; a dead worker is named, with its likely cause."""

import asyncio
import os
import signal
from pathlib import Path

import pytest
from orch_helpers import metrics, run_tiny

pytestmark = pytest.mark.e2e

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.timeout(900)  # Ray calls cost more than in-process ones on a busy 2-core box
def test_ray_backend_runs_the_tiny_recipe(local_ray, toy_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    summary = run_tiny(toy_model, out, orchestrator__backend="ray", orchestrator__num_workers=2,
                       orchestrator__max_staleness=1, max_steps=24)
    assert summary["after"]["mean_reward"] > summary["before"]["mean_reward"] + 0.3, summary
    assert summary["difference"]["change"] == "improved"
    rows = metrics(out)
    assert len(rows) == 24 and max(r["staleness_max"] for r in rows) <= 1
    assert rows[-1]["rollout_tok_s"] > 0  # counters come back from the actors


def test_dead_ray_worker_is_named_with_its_cause(local_ray, toy_model: Path) -> None:
    from temper.engine import EngineConfig
    from temper.envs.suites.arithmetic import ToySuite
    from temper.orchestrator.backends.ray import RayBackend, WorkerDied
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.rollout_worker import WorkerSpec

    agent = {"max_turn_tokens": 1, "turn_timeout_s": 60, "episode_timeout_s": 60}
    spec = WorkerSpec.of(TrainConfig.from_recipe({"agent": agent}))
    backend = RayBackend(str(toy_model), EngineConfig(kv_budget_bytes=16_000_000), ["toy:n=4"], spec, 1, None)
    try:
        task = ToySuite(n=4).tasks()[0]
        ok = asyncio.run(backend.run_episode(0, 0, task.id, "g", 0))
        assert ok.failure is None and ok.trajectories
        os.kill(backend.pids[0], signal.SIGKILL)
        with pytest.raises(WorkerDied) as err:
            for _ in range(50):  # the first calls may still race the death notice
                asyncio.run(backend.run_episode(0, 0, task.id, "g", 1))
        msg = str(err.value)
        assert "rollout worker 0" in msg and f"pid {backend.pids[0]}" in msg and "died" in msg
        assert "ActorDiedError" not in msg.split(";")[0]
    finally:
        backend.close()
