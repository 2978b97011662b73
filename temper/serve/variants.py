"""Standard and fast variants of one model, sharing one engine.

The engine's n-gram speculation is decided per step for each sequence, so one engine serves
both variants: each request says whether it may speculate (`AsyncEngine.submit(speculate=...)`),
and only `fast` requests do. Both variants therefore share
the weights, the continuous batch, the prefix cache and every weight update. A draft is kept
only where it equals the target's own greedy choice, so greedy outputs of `M:fast` equal those
of `M`; sampled (temperature > 0) requests never speculate in the engine, so they are drawn
from the very same distribution.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from temper.engine import AsyncEngine, EngineConfig, LLMEngine
from temper.engine.async_engine import EngineStream
from temper.errors import TemperError
from temper.generation import RequestError, SamplingParams, StructuredOutputs
from temper.serve.runs import Run

VARIANTS = ("standard", "fast")


class Variants:
    """The served model: one engine, two variants, a running request count and the policy version."""

    def __init__(self, model: Any, tokenizer: Any, config: EngineConfig):
        self.engine = LLMEngine(model, tokenizer, config)
        self.tokenizer = tokenizer
        self.aengine = AsyncEngine(self.engine)
        self.inflight = 0
        self.sequences = 0  # prompts x n of the requests in flight
        self.owners: dict[str, str] = {}  # request id -> the key (API key's id) that submitted it
        self.weights_lock = asyncio.Lock()  # one weight load at a time: versions only move forward
        # constraints compile here, never on the engine's thread (which would hold every request meanwhile)
        self.compilers = ThreadPoolExecutor(2, thread_name_prefix="temper-grammar")

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

    async def compile(self, so: StructuredOutputs, timeout_s: float) -> None:
        """Compile a constraint on the compile threads (the engine then finds it cached); RequestError past
        `timeout_s` (the compile goes on in its thread and is cached for a retry)."""
        future = asyncio.get_running_loop().run_in_executor(self.compilers, self.engine.grammars.compiled, so,
                                                            "grammar")
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise RequestError(f"grammar: sampling_params.structured.{so.kind}: compiling it took over "
                               f"{timeout_s:g} s (grammar.compile_timeout_s)") from None

    async def submit(self, prompts: list[list[int]], params: SamplingParams, request_id: str, variant: str,
                     owner: str = "anonymous") -> Run:
        """One engine request per prompt (n samples each; only the fast variant's may speculate), counted in
        flight (a request and its prompts x n sequences) until the run is closed, owned by `owner`. A bad
        request raises RequestError here, before anything runs."""
        streams: list[EngineStream] = []
        sequences = len(prompts) * params.n
        self.sequences += sequences  # before any await: the caller's admission check and this are one step
        self.owners[request_id] = owner
        try:
            for i, prompt in enumerate(prompts):
                rid = f"{request_id}-{i}" if len(prompts) > 1 else request_id
                streams.append(await self.aengine.submit(prompt, params, rid, speculate=variant == "fast"))
        except BaseException:
            for s in streams:
                s.close()
            self._release_sequences(request_id, sequences)
            raise
        self.inflight += 1

        def release() -> None:
            self.inflight -= 1
            self._release_sequences(request_id, sequences)

        return Run(streams, on_close=release)

    def _release_sequences(self, request_id: str, sequences: int) -> None:
        self.sequences -= sequences
        self.owners.pop(request_id, None)

    def owner(self, engine_rid: str) -> str | None:
        """Who submitted an engine request ('<id>' or, for a request of several prompts, '<id>-<i>')."""
        if engine_rid in self.owners:
            return self.owners[engine_rid]
        return self.owners.get(engine_rid.rsplit("-", 1)[0])

    async def load_weights_from(self, folder: str, version: int) -> int:
        """Load a checkpoint folder's safetensors into the running engine; returns the tensor count.
        TemperError when `version` is not after the one served (versions only move forward)."""
        async with self.weights_lock:
            self.check_version(version, strictly=True)
            state = await asyncio.to_thread(read_weights, Path(folder))
            await self.aengine.load_weights(state, version)
            return len(state)

    def check_version(self, version: int, strictly: bool) -> None:
        if version < self.version or (strictly and version == self.version):
            raise TemperError(f"version: {version} is not after the server's version {self.version} "
                              "(policy versions only move forward)")

    def set_version(self, version: int) -> None:
        """The served weights' version, moved forward only (TemperError otherwise)."""
        self.check_version(version, strictly=False)
        self.engine.version = version

    def abort_all(self) -> None:
        for rid in list(self.engine.requests):
            self.engine.abort(rid)

    def close(self) -> None:
        self.compilers.shutdown(wait=False, cancel_futures=True)
        self.aengine.close()


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    from temper.models.checkpoint import load_state_dict

    if not folder.is_dir():
        raise TemperError(f"path: {folder} is not a folder (a checkpoint folder with safetensors is expected)")
    state = load_state_dict(folder)
    # The engine's model holds no rotary buffers by name and ties lm_head to the embedding where configured.
    return {k: v for k, v in state.items() if "rotary_emb" not in k}
