"""The local backend: rollout workers in this process (the engine runs in its own thread)."""

import time
from typing import Any

from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec, sum_counters


class LocalBackend:
    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int = 1,
                 sandbox: Any = None, device: str = "auto"):
        """`device`: runtime.device of the workers' engines."""
        self.workers = [RolloutWorker.start(model, engine_cfg, suite_specs, spec.salted(i), sandbox, device)
                        for i in range(num_workers)]
        self.num_workers = num_workers
        self.update_ms: float | None = None

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        return await self.workers[worker].run_episode(suite_index, task_id, group_id, index, eval_mode, seed)

    async def push_weights(self, state: dict, version: int) -> None:
        start = time.perf_counter()
        for w in self.workers:  # an in-place tensor copy into each engine, between two of its steps
            await w.load_weights(state, version)
        self.update_ms = (time.perf_counter() - start) * 1000

    def gauges(self) -> dict[str, float]:
        return {} if self.update_ms is None else {"weight_update_ms": self.update_ms}

    def counters(self) -> dict[str, float]:
        return sum_counters(w.counters() for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.policy.close()
