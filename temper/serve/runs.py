"""`Run`: the events of one HTTP request's generations, whatever produced them (the engine's streams,
or completions a plain GenerationClient already returned), as (prompt index, TokenEvent | Completion)."""

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from temper.generation import Completion, TokenEvent

Event = tuple[int, TokenEvent | Completion]


class Run:
    """Iterate it for the events of every prompt's stream, interleaved as they come; `close()` ends what
    still runs (the client went away, a failure): each stream's `close()`, then `on_close` once."""

    def __init__(self, streams: list[AsyncIterator[TokenEvent | Completion]],
                 on_close: Callable[[], None] | None = None):
        self.streams, self.on_close = streams, on_close
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.pumps: list[asyncio.Task] = []
        self.live = len(streams)
        self.closed = False

    @classmethod
    def of(cls, completions: list[list[Completion]]) -> "Run":
        """The completions of each prompt, already generated."""
        return cls([_replay(done) for done in completions])

    def __aiter__(self) -> "Run":
        return self

    async def __anext__(self) -> Event:
        if not self.pumps and not self.closed:
            self.pumps = [asyncio.create_task(self._pump(i, s)) for i, s in enumerate(self.streams)]
        while self.live:
            item = await self.queue.get()
            if item is not None:
                return item
            self.live -= 1
        self.close()
        raise StopAsyncIteration

    async def _pump(self, index: int, stream: AsyncIterator[TokenEvent | Completion]) -> None:
        try:
            async for item in stream:
                self.queue.put_nowait((index, item))
        finally:
            self.queue.put_nowait(None)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in self.pumps:
            task.cancel()
        for stream in self.streams:
            close: Any = getattr(stream, "close", None)  # the engine's streams abort what still runs
            if close is not None:
                close()
        if self.on_close is not None:
            self.on_close()


async def _replay(done: list[Completion]) -> AsyncIterator[TokenEvent | Completion]:
    for c in done:
        yield c
