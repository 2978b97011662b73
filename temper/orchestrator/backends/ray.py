"""The Ray backend: rollout workers as Ray actors, weights broadcast through the object store.

Each actor builds the same `RolloutWorker` as the local backend (its own policy from
temper.policy: engine and sandbox pool; its own suites) and runs episodes on its own event loop.
A dead actor is reported by name, with the likely cause and the last lines of its log, not as a
bare ActorDiedError; the run goes on with the workers left, and stops with that message when none
is left.
"""

import asyncio
import contextlib
import glob
import logging
import os
from typing import Any

from temper.errors import TemperError
from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec, sum_counters

log = logging.getLogger(__name__)


class WorkerDied(TemperError):
    """A rollout worker process is gone."""


class RolloutActor:
    """The body of one Ray actor (decorated with ray.remote when the backend starts)."""

    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, sandbox: Any,
                 threads: int):
        import torch

        torch.set_num_threads(max(1, threads))
        self.worker = RolloutWorker.start(model, engine_cfg, suite_specs, spec, sandbox)

    def pid(self) -> int:
        return os.getpid()

    async def run_episode(self, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False) -> Attempt:
        return await self.worker.run_episode(suite_index, task_id, group_id, index, eval_mode)

    async def load_weights(self, state: dict, version: int) -> None:
        await self.worker.load_weights(state, version)

    async def counters(self) -> dict[str, float]:
        return self.worker.counters()

    async def close(self) -> None:
        self.worker.policy.close()


class RayBackend:
    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int,
                 sandbox: Any = None, threads: int = 1, init_timeout_s: float = 600.0):
        try:
            import ray
        except ImportError as exc:
            raise TemperError(f"orchestrator.backend=ray: Ray is not installed ({exc}); pip install ray") from None
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not ray.is_initialized():
            ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        actor_cls = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1000)(RolloutActor)
        self.actors = [actor_cls.remote(model, engine_cfg, suite_specs, spec.salted(i), sandbox, threads)
                       for i in range(num_workers)]
        self.num_workers = num_workers
        self.dead: dict[int, str] = {}
        try:
            self.pids = ray.get([a.pid.remote() for a in self.actors], timeout=init_timeout_s)
        except Exception as exc:
            raise TemperError(f"orchestrator.backend=ray: a rollout worker failed to start: "
                              f"{_first_line(exc)}") from None
        self._counters: dict[str, float] = {}

    def _live(self, worker: int) -> int:
        live = [i for i in range(self.num_workers) if i not in self.dead]
        if not live:
            raise WorkerDied("every rollout worker died; last: " + list(self.dead.values())[-1])
        return worker if worker in live else live[worker % len(live)]

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False) -> Attempt:
        i = self._live(worker)
        try:
            return await self.actors[i].run_episode.remote(suite_index, task_id, group_id, index, eval_mode)
        except Exception as exc:
            self._check_dead(i, exc)
            raise

    async def push_weights(self, state: dict, version: int) -> None:
        import ray

        live = [i for i in range(self.num_workers) if i not in self.dead]
        try:
            ref = ray.put(dict(state))  # one copy in the object store, read by every actor
            await asyncio.gather(*(self.actors[i].load_weights.remote(ref, version) for i in live))
        except Exception as exc:
            for i in live:
                self._check_dead(i, exc)
            self._live(0)  # raises when none is left
            await self.push_weights(state, version)  # the survivors still need the weights

    def _check_dead(self, i: int, exc: BaseException) -> None:
        import ray

        if i in self.dead or not isinstance(exc, ray.exceptions.RayActorError):
            return
        msg = describe_death(i, self.pids[i], exc)
        self.dead[i] = msg
        log.error(msg)
        raise WorkerDied(msg) from None

    def counters(self) -> dict[str, float]:
        import ray

        live = [self.actors[i] for i in range(self.num_workers) if i not in self.dead]
        try:
            per = ray.get([a.counters.remote() for a in live], timeout=30)
        except Exception:
            return self._counters  # a dying worker must not stop the progress line
        self._counters = sum_counters(per)
        return self._counters

    def gauges(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        import ray

        for i, a in enumerate(self.actors):
            if i not in self.dead:
                with contextlib.suppress(Exception):
                    ray.get(a.close.remote(), timeout=30)
                ray.kill(a)


def describe_death(i: int, pid: int, exc: BaseException) -> str:
    """'rollout worker 1 (pid 123) died: <likely cause>; last log lines: ...'"""
    text = str(exc)
    low = text.lower()
    if "memory" in low or "oom" in low:
        cause = "out of memory (killed by Ray's memory monitor or the kernel's OOM killer)"
    elif "sigkill" in low or "killed" in low or "exit code -9" in low or "unexpected system error" in low:
        cause = "killed (SIGKILL: often the kernel's OOM killer, or an operator)"
    elif "exited" in low or "exit" in low:
        cause = "its process exited (a crash in native code, or an explicit exit)"
    else:
        cause = _first_line(exc)
    return f"rollout worker {i} (Ray actor, pid {pid}) died: {cause}; last log lines: {_log_tail(pid) or '(none)'}"


def _log_tail(pid: int, lines: int = 5) -> str:
    files = sorted(glob.glob(f"/tmp/ray/session_latest/logs/worker-*-{pid}.*"), key=os.path.getmtime)
    tail: list[str] = []
    for f in files:
        try:
            with open(f, errors="replace") as fh:
                tail += [ln.rstrip() for ln in fh.readlines()[-lines:] if ln.strip()]
        except OSError:
            continue
    return " | ".join(tail[-lines:])


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def shutdown() -> None:
    """Stop the local Ray runtime (tests and the CLI call it at the end)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


__all__ = ["RayBackend", "WorkerDied", "describe_death", "shutdown"]
