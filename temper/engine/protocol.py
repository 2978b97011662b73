"""The generation protocol environments and agents code against.

The in-process `AsyncEngine` implements it; so can a client of a remote server (an
OpenAI-compatible temper server, vLLM, SGLang), which is why it speaks token ids only.
"""

from typing import Protocol, runtime_checkable

from temper.engine.outputs import Completion
from temper.engine.sampling_params import SamplingParams


@runtime_checkable
class GenerationClient(Protocol):
    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        """Token ids in; a completion (token ids, logprobs, policy version per token) out."""
        ...
