"""A sandbox pool that lives in Ray actors on other nodes, with the interface of `SandboxPool` and
`Sandbox` (acquire/release; exec, read/write/list files, upload, reset, close), so environments run
unchanged while their sandboxes run elsewhere (e.g. on CPU nodes, with the agent loop on GPU ones).

Each call is one actor call (blocking, like a local sandbox call: environments make it from a
thread). Folders (templates, uploads) go by content, once per signature and pool actor. A pool actor
that is gone (its node died) turns into `SandboxCrashed` (not the agent's doing: an infrastructure
failure, retried by the pipeline) and later episodes go to the pools left.

    spec = RemotePoolSpec(config, start_pool_actors(config, 2, {"sandbox": 1}))
    pool = RemoteSandboxPool(spec)          # in any process of the cluster
    sb = pool.acquire(template)
    sb.exec("pytest -q")
    pool.release(sb)
"""

import contextlib
import io
import itertools
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temper.sandbox import stage
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import SandboxCrashed, SandboxError
from temper.sandbox.remote_pool_actor import KEEP_TOKEN, SandboxPoolActor
from temper.sandbox.result import ExecResult, FileList
from temper.sandbox.sandbox import KEEP

HOP_S = 60.0  # added to a call's own timeout before the client gives up on the actor's answer
CALL_S = 120.0  # calls with no timeout of their own (files, reset)


@dataclass
class RemotePoolSpec:
    """How to reach the pool actors: picklable (Ray actor handles), so rollout worker actors get it."""

    config: SandboxConfig  # with the episode mounts (temper.envs.sandboxes.episode_config)
    actors: list[Any]


def start_pool_actors(config: SandboxConfig, n: int, resources: Mapping[str, float] | None = None,
                      pool_size: int = 8) -> list[Any]:
    """`n` sandbox pool actors, each on a node that has `resources` ("CPU"/"GPU" are Ray's own)."""
    import ray

    # a thread per in-flight call, so the pool's sandboxes run concurrently
    cls = ray.remote(**actor_options(resources), max_restarts=0, max_concurrency=256)(SandboxPoolActor)
    return [cls.remote(config, pool_size) for _ in range(n)]


def actor_options(resources: Mapping[str, float] | None) -> dict[str, Any]:
    """Ray actor options asking for `resources`: "CPU" and "GPU" go to num_cpus/num_gpus (Ray refuses
    them among custom resources); an actor asks for no CPU unless told (it mostly waits)."""
    res = dict(resources or {})
    return {"num_cpus": res.pop("CPU", 0), "num_gpus": res.pop("GPU", 0), "resources": res}


class RemoteSandboxPool:
    def __init__(self, spec: RemotePoolSpec):
        self.config, self.actors = spec.config, spec.actors
        self.gone: dict[int, str] = {}
        self.sent: set[tuple[int, str]] = set()
        self._next = itertools.count()

    def acquire(self, template: Path | str | None = KEEP, timeout: float | None = 60.0) -> "RemoteSandbox":
        """A clean sandbox from the next pool actor still there."""
        for _ in range(len(self.actors)):
            i = self._pick()
            try:
                key = KEEP_TOKEN if template is KEEP else None if template is None else self.ship(i, Path(template))
                sid, workdir = self.get(i, self.actors[i].acquire.remote(key), (timeout or CALL_S) + HOP_S)
            except SandboxCrashed:
                if i in self.gone:
                    continue  # that pool's node is gone: try the next pool
                raise
            return RemoteSandbox(self, i, sid, workdir)
        raise SandboxCrashed("every remote sandbox pool is gone: " + "; ".join(self.gone.values()))

    def release(self, sb: "RemoteSandbox") -> None:
        if sb.pool_index not in self.gone:
            with contextlib.suppress(SandboxCrashed):  # its pool is gone, and the sandbox with it
                self.get(sb.pool_index, self.actors[sb.pool_index].release.remote(sb.id), CALL_S)

    def close(self) -> None:
        """Nothing to stop: the pool actors are shared by every worker and stopped by their owner."""

    def ship(self, i: int, folder: Path) -> str:
        """The content key of `folder` on pool actor `i`, sent there (a tar) unless it has it already."""
        if not folder.is_dir():
            raise SandboxError(f"{folder}: template folder not found")
        key = stage.signature(folder)
        if (i, key) not in self.sent:
            actor = self.actors[i]
            if not self.get(i, actor.has_folder.remote(key), CALL_S):
                self.get(i, actor.put_folder.remote(key, _tar(folder)), CALL_S)
            self.sent.add((i, key))
        return key

    def get(self, i: int, ref: Any, timeout: float) -> Any:
        """The actor call's result; its own exception as raised there; a lost actor as SandboxCrashed."""
        import ray

        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
                raise cause from None
            raise SandboxError(f"remote sandbox pool {i}: {_first_line(exc)}") from None
        except ray.exceptions.GetTimeoutError:
            raise SandboxCrashed(f"remote sandbox pool {i}: no answer within {timeout:.0f} s") from None
        except ray.exceptions.RayError as exc:  # the actor, its node or the object is gone
            self.gone[i] = f"pool {i}: {_first_line(exc)}"
            raise SandboxCrashed(f"remote sandbox pool {i} is gone (its node died or left the cluster?): "
                                 f"{_first_line(exc)}") from None

    def _pick(self) -> int:
        live = [i for i in range(len(self.actors)) if i not in self.gone] or list(range(len(self.actors)))
        return live[next(self._next) % len(live)]


class RemoteSandbox:
    """One sandbox held by a pool actor; its methods are `Sandbox`'s, each one actor call."""

    def __init__(self, pool: RemoteSandboxPool, pool_index: int, sandbox_id: str, workdir: str):
        self.pool, self.pool_index, self.id, self.workdir = pool, pool_index, sandbox_id, workdir
        self.config = pool.config

    def exec(self, cmd: str | Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        wall = timeout if timeout is not None else self.config.limits.wall_time_s
        return self._call("exec", (cmd,), {"stdin": stdin, "timeout": timeout, "env": env, "cwd": cwd}, wall + HOP_S)

    def interrupt(self) -> bool:
        return self._call("interrupt", ())  # the actor is threaded: this runs beside the exec it stops

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._call("write_file", (path, data, mode))

    def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        return self._call("read_file", (path, max_bytes))

    def list_files(self, path: str = ".", recursive: bool = False) -> FileList:
        return self._call("list_files", (path, recursive))

    def upload(self, src_dir: Path | str, dest: str, read_only: bool = False) -> None:
        self._call("upload", (self.pool.ship(self.pool_index, Path(src_dir)), dest, read_only))

    def reset(self, template: Path | str | None = KEEP) -> float:
        key = KEEP_TOKEN if template is KEEP else None if template is None else self.pool.ship(
            self.pool_index, Path(template))
        return self._call("reset", (key,))

    def close(self) -> None:
        self._call("close", ())

    def _call(self, op: str, args: tuple, kwargs: dict | None = None, timeout: float = CALL_S) -> Any:
        actor = self.pool.actors[self.pool_index]
        return self.pool.get(self.pool_index, actor.call.remote(self.id, op, *args, **(kwargs or {})), timeout)


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(folder, arcname=".")
    return buf.getvalue()


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"
