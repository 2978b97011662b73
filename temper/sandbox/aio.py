"""asyncio faces of Sandbox and SandboxPool: each call runs in a worker thread.

A sandbox request is a blocking exchange on a pipe with the supervisor, so a thread per
in-flight request is the simple, honest choice; the sandboxes themselves run concurrently.
"""

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from temper.sandbox.config import SandboxConfig
from temper.sandbox.pool import SandboxPool
from temper.sandbox.result import ExecResult, FileEntry
from temper.sandbox.sandbox import KEEP, Sandbox


class AsyncSandbox:
    def __init__(self, sandbox: Sandbox):
        self.sync = sandbox

    @classmethod
    async def create(cls, config: SandboxConfig | None = None, template: Path | str | None = KEEP) -> "AsyncSandbox":
        return cls(await asyncio.to_thread(Sandbox, config, template=template))

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def workdir(self) -> str:
        return self.sync.workdir

    async def exec(self, cmd: str | Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        return await asyncio.to_thread(self.sync.exec, cmd, stdin=stdin, timeout=timeout, env=env, cwd=cwd)

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await asyncio.to_thread(self.sync.write_file, path, data, mode)

    async def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        return await asyncio.to_thread(self.sync.read_file, path, max_bytes)

    async def list_files(self, path: str = ".", recursive: bool = False) -> list[FileEntry]:
        return await asyncio.to_thread(self.sync.list_files, path, recursive)

    async def upload(self, src_dir: Path | str, dest: str) -> None:
        await asyncio.to_thread(self.sync.upload, src_dir, dest)

    async def reset(self, template: Path | str | None = KEEP) -> float:
        return await asyncio.to_thread(self.sync.reset, template)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSandboxPool:
    def __init__(self, config: SandboxConfig | None = None):
        self.sync = SandboxPool(config)

    async def acquire(self, template: Path | str | None = KEEP) -> AsyncSandbox:
        return AsyncSandbox(await asyncio.to_thread(self.sync.acquire, template))

    async def release(self, sb: AsyncSandbox) -> None:
        await asyncio.to_thread(self.sync.release, sb.sync)

    @asynccontextmanager
    async def sandbox(self, template: Path | str | None = KEEP) -> AsyncIterator[AsyncSandbox]:
        sb = await self.acquire(template)
        try:
            yield sb
        finally:
            await self.release(sb)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
