"""Standard and fast variants of one model, sharing one engine.

The engine's n-gram speculation is decided per step for each sequence, so one engine serves
both variants: only sequences of `fast` requests get drafts. Both variants therefore share
the weights, the continuous batch, the prefix cache and every weight update. A draft is kept
only where it equals the target's own greedy choice, so greedy outputs of `M:fast` equal those
of `M`; sampled (temperature > 0) requests never speculate in the engine, so they are drawn
from the very same distribution.
"""

import asyncio
from pathlib import Path
from typing import Any

import torch

from temper.engine import AsyncEngine, EngineConfig, LLMEngine
from temper.errors import TemperError
from temper.generation import Completion, SamplingParams, TokenEvent

VARIANTS = ("standard", "fast")


class Variants:
    """The served model: one engine, two variants, a running request count and the policy version."""

    def __init__(self, model: Any, tokenizer: Any, config: EngineConfig):
        self.engine = LLMEngine(model, tokenizer, config)
        self.fast_requests: set[str] = set()  # request ids of the fast variant: only they speculate
        self.engine.speculator.request_ids = self.fast_requests
        self.tokenizer = tokenizer
        self.aengine = AsyncEngine(self.engine)
        self.inflight = 0

    @classmethod
    def load(cls, name_or_path: str, config: EngineConfig, device: torch.device | str = "cpu") -> "Variants":
        """`device`: a resolved one (temper.runtime.resolve_device of runtime.device)."""
        from temper.models import load_model

        loaded = load_model(name_or_path, device=device)
        return cls(loaded.model, loaded.tokenizer, config)

    @property
    def version(self) -> int:
        return self.engine.version

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    async def submit(self, prompts: list[list[int]], params: SamplingParams, request_id: str,
                     variant: str) -> "Run":
        """Queue one engine request per prompt (n samples each). A bad request raises RequestError
        here, before anything runs; the engine lock is taken off the event loop (a step may hold it)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, TokenEvent | Completion]] = asyncio.Queue()
        run = Run(self, queue, [], params.n * len(prompts))
        for i, prompt in enumerate(prompts):
            rid = f"{request_id}-{i}" if len(prompts) > 1 else request_id

            def put(item: TokenEvent | Completion, i: int = i) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, (i, item))

            if variant == "fast":
                self.fast_requests.add(rid)
            try:
                await asyncio.to_thread(self.engine.add_request, prompt, params, rid, put, put)
            except BaseException:
                self.fast_requests.discard(rid)
                run.close()
                raise
            run.rids.append(rid)
        self.inflight += 1
        run.counted = True
        self.aengine._wake.set()  # the AsyncEngine's loop thread steps while the engine has work
        return run

    async def load_weights_from(self, folder: str, version: int) -> int:
        """Load a checkpoint folder's safetensors into the running engine; returns the tensor count."""
        state = await asyncio.to_thread(read_weights, Path(folder))
        await self.aengine.load_weights(state, version)
        return len(state)

    def abort_all(self) -> None:
        for rid in list(self.engine.requests):
            self.engine.abort(rid)

    def close(self) -> None:
        self.aengine.close()


class Run:
    """The events of one HTTP request's engine requests: (prompt index, TokenEvent | Completion)."""

    def __init__(self, variants: Variants, queue: asyncio.Queue, rids: list[str], expected: int):
        self.variants, self.queue, self.rids, self.remaining = variants, queue, rids, expected
        self.closed = False
        self.counted = False  # counted in Variants.inflight

    def __aiter__(self) -> "Run":
        return self

    async def __anext__(self) -> tuple[int, TokenEvent | Completion]:
        if not self.remaining:
            self.close()
            raise StopAsyncIteration
        item = await self.queue.get()
        if isinstance(item[1], Completion):
            self.remaining -= 1
        return item

    def close(self) -> None:
        """Release the request; whatever still runs for it (client gone, failure) is aborted."""
        if self.closed:
            return
        self.closed = True
        eng = self.variants.engine
        for rid in self.rids:
            self.variants.fast_requests.discard(rid)
        if self.counted:
            self.variants.inflight -= 1
        if self.remaining:
            loop = asyncio.get_running_loop()
            for rid in self.rids:
                loop.run_in_executor(None, eng.abort, rid)


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    from temper.models.checkpoint import load_state_dict

    if not folder.is_dir():
        raise TemperError(f"path: {folder} is not a folder (a checkpoint folder with safetensors is expected)")
    state = load_state_dict(folder)
    # The engine's model holds no rotary buffers by name and ties lm_head to the embedding where configured.
    return {k: v for k, v in state.items() if "rotary_emb" not in k}
