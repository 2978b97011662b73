"""The trainer's FSDP2 ranks as Ray actors (`orchestrator.backend: ray`, `algorithm.trainer.world_size > 1`).

Each actor hosts one `TrainerRank` (temper.rl.trainer_group), in one placement group whose bundles
ask for `orchestrator.ray.trainer_resources` (strategy `trainer_placement`, PACK by default). Actors
start in two stages: placed first (their pid, node, IP; each checks it sees the run folder), then the
ranks join a process group whose master is rank 0's node (its IP; 127.0.0.1 when every rank is on the
driver's node) on a port free there. Shards and rank logs go to the run folder, so on several
machines it must be on a filesystem they share. A rank actor that dies (its process, its node) or
raises stops the run with one line: rank, pid, node, last log lines; `--resume` goes on from the
last checkpoint, as with `TrainerGroup`.
"""

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any

from temper.errors import TemperError
from temper.net import free_port
from temper.orchestrator.backends.ray import check_placeable, connect, death_cause
from temper.orchestrator.ray_config import RayConfig
from temper.rl.config import RLConfig
from temper.rl.trainer_group import CLOSE_S, RankGroup, TrainerRank, log_to, rank_error, reply
from temper.sandbox.remote_pool import actor_options

MARKER = ".run_folder_check"  # written by the driver into the rank log folder; every rank must read it back
TOKEN_CPU = 0.001  # a placement group bundle must ask for something: an empty trainer_resources asks for this


def rank_bundle(resources: dict[str, float]) -> tuple[dict[str, Any], dict[str, float]]:
    """(the rank actor's Ray options, its placement group bundle) for `trainer_resources`."""
    opts = actor_options(resources)
    if not (opts["num_cpus"] or opts["num_gpus"] or any(opts["resources"].values())):
        opts["num_cpus"] = TOKEN_CPU
    bundle = {"CPU": opts["num_cpus"], "GPU": opts["num_gpus"], **opts["resources"]}
    return opts, {k: v for k, v in bundle.items() if v}


class RankActor:
    """The body of one rank's Ray actor (decorated with ray.remote when the group starts)."""

    def __init__(self) -> None:
        self.body: TrainerRank | None = None

    def where(self, marker: str, token: str) -> tuple[str, dict[str, Any]]:
        """pid, node id, and whether this node sees the driver's run folder."""
        import ray

        try:
            sees = Path(marker).read_text() == token
        except OSError:
            sees = False
        return "ok", {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(), "sees_run_folder": sees}

    def free_port(self, ip: str) -> int:
        return free_port(ip)

    def start(self, log: str, kwargs: dict[str, Any]) -> tuple[str, Any]:
        log_to(log)

        def build() -> dict[str, Any]:
            self.body = TrainerRank(**kwargs)
            return self.body.info()

        return reply(build)

    def call(self, method: str, args: tuple) -> tuple[str, Any]:
        return reply(getattr(self.body, method), *args)


class RayTrainerGroup(RankGroup):
    """`world_size` TrainerRanks as Ray actors, placed by `ray_cfg.trainer_resources`."""

    def __init__(self, model: str, cfg: RLConfig, world_size: int, log_dir: str | Path, device: str = "cpu",
                 threads: int = 1, seed: int = 0, ray_cfg: RayConfig | None = None, temperature: float = 1.0):
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        rc = ray_cfg or RayConfig()
        field = f"orchestrator.ray.trainer_resources={dict(rc.trainer_resources)}"
        cuda = device.startswith("cuda")
        if cuda and rc.trainer_resources.get("GPU", 0) < 1:
            raise TemperError(f"{field}: runtime.device={device} needs one GPU per trainer rank; ask for "
                              f'{{"GPU": 1}} (Ray then gives each rank its own)')
        connect(rc)
        check_placeable("trainer_resources", rc.trainer_resources, world_size)  # before anything starts
        self.world_size, self.log_dir = world_size, Path(log_dir).resolve()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.logs = [self.log_dir / f"rank_{r}.log" for r in range(world_size)]
        self.actors: list[Any] = []
        self._remove_pg = remove_placement_group
        opts, bundle = rank_bundle(rc.trainer_resources)
        self.pg = placement_group([bundle] * world_size, strategy=rc.trainer_placement)
        try:
            ray.get(self.pg.ready(), timeout=rc.init_timeout_s)
        except Exception as exc:
            self.close()
            raise TemperError(f"{field}: the cluster did not place {world_size} trainer ranks "
                              f"({rc.trainer_placement}) in {rc.init_timeout_s:g} s: {type(exc).__name__}") from None
        actor_cls = ray.remote(**opts, max_restarts=0)(RankActor)
        self.actors = [actor_cls.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=r)).remote() for r in range(world_size)]
        self.where: list[dict[str, Any]] = [{"pid": None, "node": "?", "ip": "?"}] * world_size
        self.where = self._placed(rc.init_timeout_s)
        here = ray.get_runtime_context().get_node_id()
        master = "127.0.0.1" if all(w["node"] == here for w in self.where) else self.where[0]["ip"]
        port = ray.get(self.actors[0].free_port.remote(master), timeout=60)
        gpu = 0 if cuda else None  # Ray's CUDA_VISIBLE_DEVICES: each rank sees its own GPU only
        infos = self._gather([a.start.remote(str(self.logs[r]), {
            "model": model, "cfg": cfg, "rank": r, "world_size": world_size, "master_port": port,
            "device": device, "threads": threads, "seed": seed, "master_addr": master, "gpu": gpu,
            "temperature": temperature})
            for r, a in enumerate(self.actors)])
        self._started(infos, [w["node"] for w in self.where])
        self.master = f"{master}:{port}"

    def _placed(self, timeout: float) -> list[dict[str, Any]]:
        """Each placed rank's pid, node id and node IP, once each has shown it sees the driver's run folder."""
        import ray

        token = secrets.token_hex(8)
        marker = self.log_dir / MARKER
        marker.write_text(token)
        where = self._gather([a.where.remote(str(marker), token) for a in self.actors], timeout=timeout)
        ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}  # the address each node joined with
        for r, w in enumerate(where):
            w["ip"] = ips.get(w["node"], "?")
            if not w["sees_run_folder"]:
                self.close()
                raise TemperError(f"trainer rank {r} (pid {w['pid']}, node {w['node'][:12]} at {w['ip']}) cannot "
                                  f"see the run folder {self.log_dir.parent}: with trainer ranks on several machines "
                                  f"the run folder must be on a filesystem they all share")
        return where

    def _call(self, method: str, *args: Any) -> list[Any]:
        return self._gather([a.call.remote(method, args) for a in self.actors])

    def _gather(self, refs: list[Any], timeout: float | None = None) -> list[Any]:
        """Every rank's reply, in rank order; a rank whose actor died, or that raised, is one TemperError."""
        import ray

        pending = {ref: r for r, ref in enumerate(refs)}
        replies: dict[int, Any] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            if not done:
                r = min(pending.values())
                self._fail(r, f"did not start in {timeout:g} s (orchestrator.ray.init_timeout_s)", pending)
            r = pending.pop(done[0])
            try:
                got = ray.get(done[0])
            except ray.exceptions.RayActorError as exc:
                self._fail(r, None, pending, exc)
            except Exception as exc:  # a RankActor method itself failed (it catches a rank's own errors)
                self._fail(r, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", pending)
            kind, value = got  # every RankActor method replies ("ok", value) or ("error", "Type: message")
            if kind == "error":
                self._fail(r, value, pending)
            replies[r] = value
        return [replies[r] for r in range(len(refs))]

    def _fail(self, r: int, error: str | None, pending: dict[Any, int], died: BaseException | None = None) -> None:
        """Stop every rank, then raise one line about the culprit: a rank whose actor died comes before one that
        only reported an error (a survivor's collective fails when its peer dies)."""
        import ray

        if died is None and pending:  # the others' replies show whether one of them died first
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=CLOSE_S)
            for ref in done:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    r, died = pending[ref], exc
                    break
                except Exception:
                    continue
        w = self.where[r]
        self.close(graceful=False)
        what = f"died ({death_cause(died)})" if died is not None else f"failed: {error}"
        raise rank_error(r, w["pid"], what, self.logs[r], f", node {w['node'][:12]} at {w['ip']}")

    def close(self, graceful: bool = True) -> None:
        """Ask every rank to leave its process group, then end the actors and their placement group."""
        import ray

        if graceful and self.actors:
            with contextlib.suppress(Exception):
                ray.get([a.call.remote("close", ()) for a in self.actors], timeout=CLOSE_S)
        for a in self.actors:
            with contextlib.suppress(Exception):
                ray.kill(a)
        self.actors = []
        if self.pg is not None:
            with contextlib.suppress(Exception):
                self._remove_pg(self.pg)
            self.pg = None
