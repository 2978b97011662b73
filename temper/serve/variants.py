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
from pathlib import Path
from typing import Any

import torch

from temper.engine import AsyncEngine, EngineConfig, LLMEngine
from temper.engine.async_engine import EngineStream
from temper.errors import TemperError
from temper.generation import SamplingParams
from temper.serve.runs import Run

VARIANTS = ("standard", "fast")


class Variants:
    """The served model: one engine, two variants, a running request count and the policy version."""

    def __init__(self, model: Any, tokenizer: Any, config: EngineConfig):
        self.engine = LLMEngine(model, tokenizer, config)
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

    async def submit(self, prompts: list[list[int]], params: SamplingParams, request_id: str, variant: str) -> Run:
        """One engine request per prompt (n samples each; only the fast variant's may speculate), counted in
        flight until the run is closed. A bad request raises RequestError here, before anything runs."""
        streams: list[EngineStream] = []
        try:
            for i, prompt in enumerate(prompts):
                rid = f"{request_id}-{i}" if len(prompts) > 1 else request_id
                streams.append(await self.aengine.submit(prompt, params, rid, speculate=variant == "fast"))
        except BaseException:
            for s in streams:
                s.close()
            raise
        self.inflight += 1
        return Run(streams, on_close=self._release)

    def _release(self) -> None:
        self.inflight -= 1

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


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    from temper.models.checkpoint import load_state_dict

    if not folder.is_dir():
        raise TemperError(f"path: {folder} is not a folder (a checkpoint folder with safetensors is expected)")
    state = load_state_dict(folder)
    # The engine's model holds no rotary buffers by name and ties lm_head to the embedding where configured.
    return {k: v for k, v in state.items() if "rotary_emb" not in k}
