"""What the agent loop needs from the outside: a generation client (the engine's protocol, so a
remote server can stand in) and a chat tokenizer (temper.models.Tokenizer fits)."""

from typing import Any, Protocol

from temper.engine.protocol import Completion, GenerationClient, SamplingParams


class ChatTokenizer(Protocol):
    eos_token_ids: set[int]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                            add_generation_prompt: bool = False, tokenize: bool = False, **kw: Any) -> Any: ...


__all__ = ["ChatTokenizer", "Completion", "GenerationClient", "SamplingParams"]
