"""The one place envs touch the sandbox package: handing out episode sandboxes (their blocking calls run
through temper.sandbox.aio.call, on the sandboxes' own threads), and telling a crashed sandbox from a
failing command, and a crash the agent caused (scored 0) from one it could not have caused
(infrastructure, masked).

Every episode sandbox has the scratch mounts a verifier phase needs: /logs (the verifier writes
its reward there, and keeps its HOME and TMPDIR there: a filesystem of its own, `LOGS_MB`, emptied
before the verifier runs, so an agent that fills the sandbox's disk cannot keep the verifier from
writing), /tests and /solution (uploaded only after the agent phase, or for an oracle run).
"""

from pathlib import Path
from typing import Any

from temper.envs.reward import Reward
from temper.errors import TemperError
from temper.sandbox import AsyncSandboxPool, ImageRoot, Limits, Mount, Sandbox, SandboxConfig, SandboxPool
from temper.sandbox.aio import call
from temper.sandbox.errors import SandboxCrashed
from temper.sandbox.remote_pool import RemotePoolSpec, RemoteSandboxPool
from temper.trajectory import FailureKind

EPISODE_MOUNTS = ("/logs", "/tests", "/solution")
LOGS_MB = 64  # /logs: the verifier's reward, logs, HOME and TMPDIR (a tmpfs of its own in bwrap mode)


def episode_config(base: SandboxConfig | None = None, limits: Limits | None = None) -> SandboxConfig:
    base = base or SandboxConfig()
    have = {m.dest for m in base.mounts}
    mounts = [*base.mounts, *(Mount(dest=d, writable=True, size_mb=LOGS_MB if d == "/logs" else None)
                              for d in EPISODE_MOUNTS if d not in have)]
    update: dict[str, Any] = {"mounts": mounts}
    if limits is not None:
        update["limits"] = limits
    return base.model_copy(update=update)


class SandboxProvider:
    """Hands out one sandbox per episode, on the given workspace template: from a warm
    `SandboxPool` when given one (its config must come from `episode_config`; the pool's limits
    then apply to every task), else a fresh sandbox with the task's own limits."""

    def __init__(self, config: SandboxConfig | None = None, pool: SandboxPool | AsyncSandboxPool | None = None):
        self.pool = pool.sync if isinstance(pool, AsyncSandboxPool) else pool
        if self.pool is not None:
            missing = [d for d in EPISODE_MOUNTS if d not in {m.dest for m in self.pool.config.mounts}]
            if missing:
                raise TemperError(f"sandbox pool: its config lacks the mounts {missing} that episodes need; "
                                  "build it with temper.envs.sandboxes.make_pool or episode_config()")
        self.config = episode_config(config)

    def unpooled(self) -> "SandboxProvider":
        """Fresh sandboxes of the same configuration, beside a local pool: for a sandbox wanted while the
        episodes holding every pooled one wait for it (e.g. a verifier's control run)."""
        return SandboxProvider(config=self.pool.config) if isinstance(self.pool, SandboxPool) else self

    async def acquire(self, template: Path | None = None, limits: Limits | None = None,
                      image: ImageRoot | None = None) -> Sandbox:
        """`image`: a sandbox on that image's root filesystem with the task's limits, from the pool's warm pool for
        that image (else fresh); the episode mounts are folders of the image (/logs a tmpfs)."""
        if self.pool is not None and image is None:
            return await call(self.pool.acquire, template)
        if image is not None and isinstance(self.pool, SandboxPool):  # warm, from the image's own pool
            return await call(self.pool.image_pool(image, limits).acquire)
        cfg = self.config
        update: dict[str, Any] = {} if limits is None else {"limits": limits}
        if image is not None:
            update.update(image=image, workspace=None, mounts=[m for m in cfg.mounts if m.src is None])
        return await call(Sandbox, cfg.model_copy(update=update) if update else cfg,
                          template=None if image is not None else template)

    async def release(self, sb: Sandbox) -> None:
        image = sb.config.image
        if image is not None and isinstance(self.pool, SandboxPool):
            await call(self.pool.image_pool(image, sb.config.limits).release, sb)
        elif self.pool is not None and image is None:
            await call(self.pool.release, sb)
        else:
            await call(sb.close)


def make_pool(config: SandboxConfig | RemotePoolSpec | None = None, size: int | None = None) -> Any:
    """A warm pool whose sandboxes have the mounts episodes need; given a RemotePoolSpec (the Ray
    backend's, with orchestrator.ray.remote_sandboxes), the client of its pool actors elsewhere."""
    if isinstance(config, RemotePoolSpec):
        return RemoteSandboxPool(config)  # the pool actors were sized and configured by the backend
    cfg = episode_config(config)
    if size is not None:
        cfg = cfg.model_copy(update={"pool_size": size})
    return SandboxPool(cfg)


def as_provider(pool: Any) -> SandboxProvider:
    """What make_env accepts as `pool`: None (fresh sandboxes), a provider, or a sandbox pool."""
    if isinstance(pool, SandboxProvider):
        return pool
    return SandboxProvider(pool=pool)


def is_sandbox_crash(exc: BaseException) -> bool:
    """A sandbox whose supervisor died or stopped answering (the episode cannot go on in it)."""
    return isinstance(exc, SandboxCrashed)


def broken_by_agent(why: str, info: dict[str, Any] | None = None) -> Reward:
    """A 0 for an agent that broke, in its own sandbox, what its episode needs (never masked: docs/envs.md)."""
    return Reward(value=0.0, info={**(info or {}), "error": why, "sandbox_broken_by_agent": True})


def verifier_broken(why: str, info: dict[str, Any] | None = None) -> Reward:
    """A 0 for an agent whose work, run by the verifier, kept it from finishing by itself with a reward it
    can trust (killed it, hung it, left no or no parseable reward): never masked (docs/envs.md)."""
    return Reward(value=0.0, info={**(info or {}), "error": why, "verifier_broken_by_agent": True})


def crash_reward(exc: BaseException, where: str) -> Reward:
    """The reward of an episode whose sandbox crashed `where` (e.g. "during bash"): a 0, scored like any
    failed attempt, when what the agent ran or left in the sandbox broke it (`SandboxCrashed.by_agent`:
    an OOM kill in its own cgroup, a supervisor it made stop answering); else an infrastructure failure,
    masked out (the host closed or killed it, a death between calls). See docs/envs.md."""
    why = f"sandbox crashed {where}: {exc}"
    if getattr(exc, "by_agent", False):
        return broken_by_agent(why)
    return Reward.infra(FailureKind.SANDBOX_CRASH, why)
