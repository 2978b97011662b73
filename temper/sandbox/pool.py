"""A bounded pool of warm sandboxes: acquire in about a reset's time instead of a cold start.

A background thread keeps `pool_size` idle sandboxes started (clean, on the pool's template)
and resets the released ones, so `acquire` normally just pops one. A sandbox taken for a
different template is re-pointed at it by its reset (an overlay remount, ~1 ms) since every
sandbox sees the staged templates. At most `pool_max` sandboxes are alive at once.

    pool = SandboxPool(SandboxConfig(pool_size=4))
    with pool.sandbox(template=Path("tasks/t1")) as sb:
        sb.exec("pytest -q")
    pool.close()
"""

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from temper.sandbox.audit import AuditLog
from temper.sandbox.config import ImageRoot, Limits, SandboxConfig
from temper.sandbox.errors import SandboxError
from temper.sandbox.sandbox import KEEP, Sandbox

log = logging.getLogger("temper.sandbox")


class SandboxPool:
    def __init__(self, config: SandboxConfig | None = None, audit: AuditLog | None = None):
        self.config = config or SandboxConfig()
        self.audit = audit if audit is not None else (
            AuditLog.shared(self.config.audit_path) if self.config.audit else None)
        self._idle: deque[Sandbox] = deque()
        self._dirty: deque[Sandbox] = deque()
        self._alive = 0
        self._closed = False
        self._cond = threading.Condition()
        self.stats = {"warm": 0, "cold": 0, "started": 0, "failed": 0}
        self._children: dict[str, SandboxPool] = {}  # warm pools of image sandboxes, one per image and limits
        self._thread = threading.Thread(target=self._refill, name="sandbox-pool", daemon=True)
        self._thread.start()

    def acquire(self, template: Path | str | None = KEEP, timeout: float | None = 60.0) -> Sandbox:
        """A clean sandbox on `template` (KEEP: the config's workspace). Release it when done."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._closed or self._idle or self._alive < self.config.pool_max,
                                       timeout):
                raise SandboxError(f"pool_max: no sandbox free within {timeout} s ({self._alive} in use)")
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            sb = self._idle.popleft() if self._idle else None
            if sb is None:
                self._alive += 1
            self._cond.notify_all()  # the refill thread tops the idle set up again
        if sb is None:
            try:
                sb = self._new(template)
            except BaseException:
                with self._cond:
                    self._alive -= 1
                raise
            self.stats["cold"] += 1
            return sb
        self.stats["warm"] += 1
        sb.warm = True
        wanted = self.config.workspace if template is KEEP else template
        if (Path(wanted) if wanted is not None else None) != sb.template:
            sb.reset(template=wanted)
        return sb

    def image_pool(self, image: ImageRoot, limits: Limits | None = None) -> "SandboxPool":
        """A warm pool of sandboxes on `image` (with `limits`, default this pool's), of this pool's size, kept
        and closed with this pool: an image's sandboxes cannot be re-pointed at another image by a reset."""
        update: dict = {"image": image, "workspace": None, "mounts": [m for m in self.config.mounts if m.src is None]}
        if limits is not None:
            update["limits"] = limits
        cfg = self.config.model_copy(update=update)
        key = cfg.model_dump_json()
        with self._cond:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            if key not in self._children:
                self._children[key] = SandboxPool(cfg, self.audit)
            return self._children[key]

    def release(self, sb: Sandbox) -> None:
        """Give a sandbox back: the pool resets it in the background before anyone else gets it."""
        with self._cond:
            if self._closed:
                self._alive -= 1
                sb.close()
                return
            self._dirty.append(sb)
            self._cond.notify_all()

    @contextlib.contextmanager
    def sandbox(self, template: Path | str | None = KEEP) -> Iterator[Sandbox]:
        sb = self.acquire(template)
        try:
            yield sb
        finally:
            self.release(sb)

    @property
    def idle(self) -> int:
        return len(self._idle)

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Block until `pool_size` sandboxes are idle (e.g. before a benchmark)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._idle) >= min(self.config.pool_size, self.config.pool_max),
                                       timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            victims = list(self._idle) + list(self._dirty)
            self._idle.clear()
            self._dirty.clear()
            children, self._children = list(self._children.values()), {}
            self._cond.notify_all()
        self._thread.join(timeout=30)
        for sb in victims:
            sb.close()
        for child in children:
            child.close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- background ---------------------------------------------------------------------------
    def _new(self, template: Path | str | None = KEEP) -> Sandbox:
        sb = Sandbox(self.config, template=template, audit=self.audit)
        self.stats["started"] += 1
        return sb

    def _refill(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._dirty or (
                    len(self._idle) < self.config.pool_size and self._alive < self.config.pool_max))
                if self._closed:
                    return
                sb = self._dirty.popleft() if self._dirty else None
                if sb is None:
                    self._alive += 1
            try:
                if sb is not None:
                    sb.warm = False
                    sb.reset(template=self.config.workspace) if sb.template != self.config.workspace else sb.reset()
                else:
                    sb = self._new()
            except Exception as exc:  # a sandbox that cannot start or reset is dropped, not fatal
                log.warning("sandbox pool: %s", exc)
                self.stats["failed"] += 1
                if sb is not None:
                    sb.close()
                with self._cond:
                    self._alive -= 1
                    self._cond.notify_all()
                if self.stats["failed"] > 3 * (self.stats["started"] + 1):
                    with self._cond:
                        self._cond.wait(1.0)  # keep failing? slow down instead of spinning
                continue
            with self._cond:
                if self._closed:
                    self._alive -= 1
                    sb.close()
                    return
                if len(self._idle) >= self.config.pool_size:
                    self._alive -= 1  # more than the pool keeps warm: let it go
                    sb.close()
                else:
                    self._idle.append(sb)
                self._cond.notify_all()
