"""The Ray backend: rollout workers as Ray actors, weights broadcast through the object store.

Each actor builds the same `RolloutWorker` as the local backend (its own policy from
temper.episode_runner: engine and sandbox pool; its own suites) and runs episodes on its own event loop.
The cluster is local (started for the run) or an existing one (`orchestrator.ray.address`); actors
go to the nodes that have the resources they ask for (`worker_resources`, `sandbox_resources`).
With `remote_sandboxes`, sandbox pools are actors of their own (temper.sandbox.remote_pool) and
the workers' episodes reach their sandboxes through them.
A dead actor (its process or its node gone) is reported by name, with the likely cause and the last
lines of its log, not as a bare ActorDiedError; its episodes fail as infrastructure failures that
the pipeline retries on the workers left, and the run goes on with those. When none is left the run
stops with that message.
"""

import asyncio
import contextlib
import glob
import logging
import math
import os
import socket
from collections.abc import Mapping
from typing import Any

from temper.errors import TemperError
from temper.logs import log_tail
from temper.orchestrator.backends.protocol import Attempt, BackendExhausted
from temper.orchestrator.ray_config import RayConfig
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec, sum_counters
from temper.sandbox.remote_pool import RemotePoolSpec, actor_options, start_pool_actors

log = logging.getLogger(__name__)


class WorkerDied(TemperError):
    """A rollout worker process is gone."""


class WorkersExhausted(WorkerDied, BackendExhausted):
    """Every rollout worker is gone: the run stops (BackendExhausted is never retried)."""


class RolloutActor:
    """The body of one Ray actor (decorated with ray.remote when the backend starts)."""

    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, sandbox: Any,
                 threads: int, device: str = "auto"):
        import torch

        torch.set_num_threads(max(1, threads))
        # runtime.device, resolved on the actor's own node ("auto": the GPU Ray gave it, if it asked for one)
        self.worker = RolloutWorker.start(model, engine_cfg, suite_specs, spec, sandbox, device)

    def where(self) -> tuple[int, str]:
        """(pid, Ray node id) of this actor."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    async def run_episode(self, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        return await self.worker.run_episode(suite_index, task_id, group_id, index, eval_mode, seed)

    async def load_weights(self, state: dict, version: int) -> None:
        await self.worker.load_weights(state, version)

    async def counters(self) -> dict[str, float]:
        return self.worker.counters()

    async def close(self) -> None:
        self.worker.policy.close()


def connect(cfg: RayConfig) -> None:
    """Join `cfg.address`'s cluster, or start a local one (never a cluster found on the machine by chance)."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        return
    if cfg.address not in (None, "auto"):  # Ray itself retries an unreachable head for minutes
        host, _, port = cfg.address.removeprefix("ray://").rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
        except OSError as exc:
            raise TemperError(f"orchestrator.ray.address={cfg.address}: no Ray head answers there ({exc}); "
                              f"start one with `ray start --head --port {port}`") from None
    try:
        if cfg.address is None:
            ray.init(address="local", num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING)
        else:
            ray.init(address=cfg.address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise TemperError(f"orchestrator.ray.address={cfg.address}: cannot join that Ray cluster: "
                          f"{_first_line(exc)}") from None


def check_placeable(field: str, resources: Mapping[str, float], count: int) -> None:
    """Fail at once, naming the field, when the cluster's live nodes cannot hold `count` actors that
    each ask for `resources` (Ray would leave them pending forever)."""
    import ray

    need = {k: v for k, v in resources.items() if v > 0}
    if not need or count == 0:
        return
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    room = sum(min(math.floor(n.get(k, 0) / v + 1e-9) for k, v in need.items()) for n in nodes)
    if room < count:
        offered = sorted({k for n in nodes for k in n if not k.startswith("node:") and "memory" not in k})
        raise TemperError(f"orchestrator.ray.{field}={dict(resources)}: the cluster's nodes have room for {room} "
                          f"of the {count} actors that ask for it (resources offered: {', '.join(offered)})")


class RayBackend:
    def __init__(self, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int,
                 sandbox: Any = None, threads: int = 1, init_timeout_s: float | None = None,
                 ray_cfg: RayConfig | None = None, device: str = "auto"):
        try:
            import ray
        except ImportError as exc:
            raise TemperError(f"orchestrator.backend=ray: Ray is not installed ({exc}); pip install ray") from None
        cfg = ray_cfg or RayConfig()
        timeout = init_timeout_s or cfg.init_timeout_s
        connect(cfg)
        check_placeable("worker_resources", cfg.worker_resources, num_workers)
        check_placeable("sandbox_resources", cfg.sandbox_resources, cfg.remote_sandboxes)
        self.sandbox_pools: list[Any] = []
        if cfg.remote_sandboxes:
            from temper.envs.sandboxes import episode_config

            sb_cfg = episode_config(sandbox)
            self.sandbox_pools = start_pool_actors(sb_cfg, cfg.remote_sandboxes, cfg.sandbox_resources,
                                                   cfg.sandbox_pool_size)
            sandbox = RemotePoolSpec(sb_cfg, self.sandbox_pools)
        actor_cls = ray.remote(**actor_options(cfg.worker_resources), max_restarts=0,
                               max_concurrency=1000)(RolloutActor)
        self.actors = [actor_cls.remote(model, engine_cfg, suite_specs, spec.salted(i), sandbox, threads, device)
                       for i in range(num_workers)]
        self.num_workers = num_workers
        self.dead: dict[int, str] = {}
        try:
            where = ray.get([a.where.remote() for a in self.actors], timeout=timeout)
            self.sandbox_where = ray.get([p.where.remote() for p in self.sandbox_pools], timeout=timeout)
        except Exception as exc:
            self.close()
            raise TemperError(f"orchestrator.backend=ray: a rollout worker or sandbox pool failed to start: "
                              f"{_first_line(exc)}") from None
        self.pids, self.nodes = [w[0] for w in where], [w[1] for w in where]
        log.info("ray backend: rollout workers on nodes %s; sandbox pools on %s", self.nodes,
                 [w["node_id"] for w in self.sandbox_where] or "the workers' own")
        self._counters: dict[str, float] = {}

    def _live(self, worker: int) -> int:
        live = [i for i in range(self.num_workers) if i not in self.dead]
        if not live:
            raise WorkersExhausted("every rollout worker died; last: " + list(self.dead.values())[-1])
        return worker if worker in live else live[worker % len(live)]
    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        i = self._live(worker)
        try:
            return await self.actors[i].run_episode.remote(suite_index, task_id, group_id, index, eval_mode, seed)
        except Exception as exc:
            self._check_dead(i, exc)
            raise

    async def push_weights(self, state: dict, version: int) -> None:
        """The new weights to every live worker; one that died meanwhile is marked dead (not the others)."""
        import ray

        live = [i for i in range(self.num_workers) if i not in self.dead]
        # one copy in the object store, read by every actor; host tensors (a GPU trainer's would pin its device)
        ref = ray.put({k: v.cpu() for k, v in state.items()})
        results = await asyncio.gather(*(self.actors[i].load_weights.remote(ref, version) for i in live),
                                       return_exceptions=True)
        for i, r in zip(live, results, strict=True):
            if isinstance(r, ray.exceptions.RayActorError):
                self._mark_dead(i, r)
            elif isinstance(r, BaseException):
                raise r
        self._live(0)  # raises when none is left

    def _check_dead(self, i: int, exc: BaseException) -> None:
        import ray

        if i in self.dead or not isinstance(exc, ray.exceptions.RayActorError):
            return
        raise WorkerDied(self._mark_dead(i, exc)) from None

    def _mark_dead(self, i: int, exc: BaseException) -> str:
        msg = self.dead[i] = describe_death(i, self.pids[i], exc)
        log.error(msg)
        return msg

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
        for p in self.sandbox_pools:  # after the workers: they release their sandboxes first
            with contextlib.suppress(Exception):
                ray.get(p.close.remote(), timeout=60)
            with contextlib.suppress(Exception):
                ray.kill(p)


def describe_death(i: int, pid: int, exc: BaseException) -> str:
    """'rollout worker 1 (pid 123) died: <likely cause>; last log lines: ...'"""
    return (f"rollout worker {i} (Ray actor, pid {pid}) died: {death_cause(exc)}; "
            f"last log lines: {_log_tail(pid) or '(none)'}")


def death_cause(exc: BaseException) -> str:
    """The likely cause of a Ray actor's death, from its RayActorError."""
    low = str(exc).lower()
    if "node has died" in low or "node died" in low or ("node was" in low and "dead" in low):
        cause = "its node died or left the cluster (a lost machine, or a raylet killed)"
    elif "low on memory" in low or "out of memory" in low:  # Ray's memory monitor (its SIGKILL text names OOM too)
        cause = "out of memory (killed by Ray's memory monitor or the kernel's OOM killer)"
    elif "sigkill" in low or "killed" in low or "exit code -9" in low or "unexpected system error" in low:
        cause = "killed (SIGKILL: often the kernel's OOM killer, or an operator)"
    elif "exited" in low or "exit" in low:
        cause = "its process exited (a crash in native code, or an explicit exit)"
    else:
        cause = _first_line(exc)
    return cause


def _log_tail(pid: int, lines: int = 5) -> str:
    files = sorted(glob.glob(f"{_session_dir()}/logs/worker-*-{pid}.*"), key=os.path.getmtime)
    tail: list[str] = []
    for f in files:
        tail += log_tail(f, lines) or []
    return " | ".join(tail[-lines:])


def _session_dir() -> str:
    """This driver's Ray session folder (a cluster started with --temp-dir keeps it there); logs of actors
    on other machines are on those machines."""
    try:
        import ray

        return ray._private.worker._global_node.get_session_dir_path()
    except Exception:  # a private API: fall back to Ray's default place
        return "/tmp/ray/session_latest"


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def shutdown() -> None:
    """Leave Ray: stops a local cluster started for the run; an attached cluster keeps running."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


__all__ = ["RayBackend", "WorkerDied", "WorkersExhausted", "check_placeable", "connect", "death_cause",
           "describe_death", "shutdown"]
