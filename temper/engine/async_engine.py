"""The asyncio face of the engine, for agent loops driving many concurrent conversations.

One background thread runs `LLMEngine.step()` while there is work (torch releases the GIL
in its kernels, so the event loop stays responsive); every new token and every finished
sample is handed to the asking coroutine through its own queue.

    engine = AsyncEngine(LLMEngine(model, tokenizer))
    completion = await engine.generate(token_ids, SamplingParams(temperature=1.0))
    async for item in engine.stream(token_ids, params):  # TokenEvent ..., then Completion(s)
        ...
    events = await engine.submit(token_ids, params)  # queued now (RequestError here); iterate, close()
"""

import asyncio
import functools
import itertools
import threading
from collections.abc import AsyncIterator, Mapping, Sequence

import torch

from temper import cores
from temper.engine.llm_engine import LLMEngine
from temper.generation.completion import Completion, TokenEvent
from temper.generation.sampling_params import SamplingParams


class AsyncEngine:
    def __init__(self, engine: LLMEngine):
        self.engine = engine
        self._wake = threading.Event()
        self._running = threading.Event()  # cleared by pause(): requests stay queued, no step runs
        self._running.set()
        self._step_lock = threading.Lock()  # held for one step: pause() returns only between steps
        self._closed = False
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._loop, name="temper-engine", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            while not self._closed and self.engine.has_unfinished():
                if not self._running.is_set():
                    self._running.wait(0.1)
                    continue
                with self._step_lock:
                    if self._running.is_set():
                        if (share := cores.current()) is not None:  # all cores while the trainer waits
                            share.engine_threads()
                        self.engine.step()
            if (share := cores.current()) is not None:
                share.engine_idle()

    async def submit(self, prompt: str | Sequence[int], params: SamplingParams | None = None,
                     request_id: str | None = None, speculate: bool = True) -> "EngineStream":
        """Queue a request now and return its events (TokenEvents, then n Completions). A bad request
        raises RequestError here, before anything runs; others are unaffected. `speculate=False`: it
        never drafts (serve's standard variant)."""
        params = params or SamplingParams()
        rid = request_id or f"async-{next(self._ids)}"
        stream = EngineStream(self.engine, rid, params.n)
        add = functools.partial(self.engine.add_request, prompt, params, rid, stream.put, stream.put, speculate)
        if params.structured is not None:  # compiling a grammar may take a while: not on the event loop
            await asyncio.to_thread(add)
        else:  # the intake lock only, never a step: cheap enough for the loop
            add()
        self._wake.set()
        return stream

    async def stream(self, prompt: str | Sequence[int], params: SamplingParams | None = None,
                     request_id: str | None = None) -> AsyncIterator[TokenEvent | Completion]:
        """Yield each new token as a TokenEvent, then each sample's Completion (n of them)."""
        stream = await self.submit(prompt, params, request_id)
        try:
            async for item in stream:
                yield item
        finally:
            stream.close()

    async def generate_n(self, prompt: str | Sequence[int], params: SamplingParams | None = None,
                         request_id: str | None = None) -> list[Completion]:
        done = [item async for item in self.stream(prompt, params, request_id) if isinstance(item, Completion)]
        return sorted(done, key=lambda c: c.index)

    async def generate(self, token_ids: Sequence[int], params: SamplingParams | None = None,
                       request_id: str | None = None) -> Completion:
        """The `GenerationClient` call: one sample for one token-id prompt."""
        params = params or SamplingParams()
        if params.n != 1:
            raise ValueError("generate() returns one sample; use generate_n() for n > 1")
        return (await self.generate_n(token_ids, params, request_id))[0]

    async def abort(self, request_id: str) -> list[Completion]:
        """Stop a request; its samples finish with 'abort' and their partial tokens."""
        return await asyncio.to_thread(self.engine.abort, request_id)

    async def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """New weights between two steps (the engine lock orders it against the running loop)."""
        await asyncio.to_thread(self.engine.load_weights, state_dict, version)

    async def pause(self) -> None:
        """Stop stepping once the current step ends; every request keeps its place and its KV."""
        self._running.clear()
        await asyncio.to_thread(self._wait_step)

    def _wait_step(self) -> None:
        with self._step_lock:
            pass

    def resume(self) -> None:
        self._running.set()
        self._wake.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def close(self) -> None:
        self._running.set()
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5)


class EngineStream:
    """One request's events, fed from the engine thread: TokenEvents, then its n Completions.
    `close()` before the last Completion aborts the request (its consumer went away)."""

    def __init__(self, engine: LLMEngine, request_id: str, n: int):
        self.engine, self.request_id, self.remaining = engine, request_id, n
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[TokenEvent | Completion] = asyncio.Queue()
        self.closed = False

    def put(self, item: TokenEvent | Completion) -> None:  # on the engine thread
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def __aiter__(self) -> "EngineStream":
        return self

    async def __anext__(self) -> TokenEvent | Completion:
        if not self.remaining:
            raise StopAsyncIteration
        item = await self.queue.get()
        if isinstance(item, Completion):
            self.remaining -= 1
        return item

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.remaining:  # abort waits for the step lock: off the event loop, not awaited
            self.loop.run_in_executor(None, self.engine.abort, self.request_id)
