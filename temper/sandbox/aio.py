"""The asyncio face of sandboxes: `call(fn, ...)` runs a blocking sandbox call on a thread pool of its own,
and AsyncSandbox / AsyncSandboxPool are Sandbox and SandboxPool with every method through it.

A sandbox request is a blocking exchange on a pipe with the supervisor, so a thread per in-flight
request is the simple, honest choice; the sandboxes themselves run concurrently. Those calls block
for as long as a command runs (up to minutes): on the default executor (6 threads on 2 cores) a few
slow commands would starve every other `asyncio.to_thread` of the process, so they never run there.
"""

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from temper.sandbox.config import SandboxConfig
from temper.sandbox.pool import SandboxPool
from temper.sandbox.result import ExecResult, FileEntry
from temper.sandbox.sandbox import KEEP, Sandbox

T = TypeVar("T")
EXECUTOR = ThreadPoolExecutor(max_workers=128, thread_name_prefix="temper-sandbox-call")


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking sandbox call off the event loop, on the sandboxes' own threads."""
    return await asyncio.get_running_loop().run_in_executor(EXECUTOR, functools.partial(fn, *args, **kwargs))


class AsyncSandbox:
    def __init__(self, sandbox: Sandbox):
        self.sync = sandbox

    @classmethod
    async def create(cls, config: SandboxConfig | None = None, template: Path | str | None = KEEP) -> "AsyncSandbox":
        return cls(await call(Sandbox, config, template=template))

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def workdir(self) -> str:
        return self.sync.workdir

    async def exec(self, cmd: str | Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        return await call(self.sync.exec, cmd, stdin=stdin, timeout=timeout, env=env, cwd=cwd)

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await call(self.sync.write_file, path, data, mode)

    async def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        return await call(self.sync.read_file, path, max_bytes)

    async def list_files(self, path: str = ".", recursive: bool = False) -> list[FileEntry]:
        return await call(self.sync.list_files, path, recursive)

    async def upload(self, src_dir: Path | str, dest: str) -> None:
        await call(self.sync.upload, src_dir, dest)

    async def reset(self, template: Path | str | None = KEEP) -> float:
        return await call(self.sync.reset, template)

    async def close(self) -> None:
        await call(self.sync.close)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSandboxPool:
    def __init__(self, config: SandboxConfig | None = None):
        self.sync = SandboxPool(config)

    async def acquire(self, template: Path | str | None = KEEP) -> AsyncSandbox:
        return AsyncSandbox(await call(self.sync.acquire, template))

    async def release(self, sb: AsyncSandbox) -> None:
        await call(self.sync.release, sb.sync)

    @asynccontextmanager
    async def sandbox(self, template: Path | str | None = KEEP) -> AsyncIterator[AsyncSandbox]:
        sb = await self.acquire(template)
        try:
            yield sb
        finally:
            await self.release(sb)

    async def close(self) -> None:
        await call(self.sync.close)
