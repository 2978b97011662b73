"""What agents and environments need from a policy: a generation client (token ids in, token ids
and logprobs out) and a chat tokenizer. The in-process `AsyncEngine` implements the client; so
does `RemoteClient` over an OpenAI-compatible server (temper serve, vLLM, SGLang)."""

from typing import Any, Protocol, runtime_checkable

from temper.generation.completion import Completion
from temper.generation.sampling_params import SamplingParams


@runtime_checkable
class GenerationClient(Protocol):
    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        """Token ids in; a completion (token ids, logprobs, policy version per token) out."""
        ...


class ChatTokenizer(Protocol):
    """What the agent loop needs of a tokenizer (temper.models.Tokenizer fits)."""

    eos_token_ids: set[int]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                            add_generation_prompt: bool = False, tokenize: bool = False, **kw: Any) -> Any: ...
