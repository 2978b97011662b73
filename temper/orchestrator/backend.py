"""The local backend: rollout workers in this process (the engine runs in its own thread)."""

from typing import Any

from temper.orchestrator.faults import Attempt
from temper.orchestrator.rollout_worker import WorkerSpec, build_worker, sum_counters
from temper.orchestrator.weight_sync import publish_local


class LocalBackend:
    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int = 1,
                 sandbox_run_dir: str | None = None):
        self.workers, self._closers = [], []
        for i in range(num_workers):
            spec_i = WorkerSpec(**{**spec.__dict__, "salt": i})
            worker, close = build_worker(model, engine_cfg, suite_specs, spec_i, sandbox_run_dir)
            self.workers.append(worker)
            self._closers.append(close)
        self.num_workers = num_workers

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False) -> Attempt:
        return await self.workers[worker].run_episode(suite_index, task_id, group_id, index, eval_mode)

    async def push_weights(self, state: dict, version: int) -> None:
        await publish_local(self.workers, state, version)

    def counters(self) -> dict[str, float]:
        return sum_counters(w.counters() for w in self.workers)

    def close(self) -> None:
        for close in self._closers:
            close()


def make_backend(cfg: Any, suite_specs: list[str], sandbox_run_dir: str | None) -> Any:
    o = cfg.orchestrator
    spec = WorkerSpec(agent=cfg.agent, faults=o.faults, partial_rollouts=o.partial_rollouts,
                      episode_timeout_s=o.episode_timeout_s, eval_temperature=cfg.eval.temperature,
                      eval_max_new_tokens=cfg.eval.max_new_tokens, salt=0)
    if o.backend == "remote":
        from temper.orchestrator.remote_backend import RemoteBackend

        return RemoteBackend(cfg.model, o.remote, suite_specs, spec, o.num_workers, sandbox_run_dir)
    if o.backend == "ray":
        from temper.orchestrator.ray_backend import RayBackend

        return RayBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox_run_dir,
                          threads=cfg.runtime.threads)
    return LocalBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox_run_dir)
