"""The one place envs touch the sandbox package: handing out episode sandboxes, async calls,
and telling a crashed sandbox (infrastructure) from a failing command (the agent's business).

Every episode sandbox has the scratch mounts a verifier phase needs: /logs (the verifier writes
its reward there), /tests and /solution (uploaded only after the agent phase, or for an oracle run).
"""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from temper.sandbox import Limits, Mount, Sandbox, SandboxConfig
from temper.sandbox.errors import SandboxCrashed

T = TypeVar("T")
EPISODE_MOUNTS = ("/logs", "/tests", "/solution")


def episode_config(base: SandboxConfig | None = None, limits: Limits | None = None) -> SandboxConfig:
    base = base or SandboxConfig()
    have = {m.dest for m in base.mounts}
    mounts = [*base.mounts, *(Mount(dest=d, writable=True) for d in EPISODE_MOUNTS if d not in have)]
    update: dict[str, Any] = {"mounts": mounts}
    if limits is not None:
        update["limits"] = limits
    return base.model_copy(update=update)


class SandboxProvider:
    """Hands out one sandbox per episode, started on the given workspace template. `pool` (a
    temper.sandbox pool with `acquire`/`release`) serves warm sandboxes when given."""

    def __init__(self, config: SandboxConfig | None = None, pool: Any = None) -> None:
        self.config = episode_config(config)
        self.pool = pool

    async def acquire(self, template: Path | None = None, limits: Limits | None = None) -> Sandbox:
        if self.pool is not None and hasattr(self.pool, "acquire"):
            sb = self.pool.acquire(template=template)
            return await sb if asyncio.iscoroutine(sb) else sb
        cfg = self.config if limits is None else self.config.model_copy(update={"limits": limits})
        return await asyncio.to_thread(Sandbox, cfg, template=template)

    async def release(self, sb: Sandbox) -> None:
        if self.pool is not None and hasattr(self.pool, "release"):
            out = self.pool.release(sb)
            if asyncio.iscoroutine(out):
                await out
            return
        await asyncio.to_thread(sb.close)


def as_provider(pool: Any) -> SandboxProvider:
    """What make_env accepts as `pool`: None (fresh sandboxes), a provider, or a sandbox pool."""
    if isinstance(pool, SandboxProvider):
        return pool
    return SandboxProvider(pool=pool)


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking sandbox call off the event loop, so many episodes run concurrently."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def is_sandbox_crash(exc: BaseException) -> bool:
    """A sandbox whose supervisor died or stopped answering: an infrastructure failure."""
    return isinstance(exc, SandboxCrashed)
