"""Chat rendering for a token-in/token-out loop: the prompt once, then only the new tokens.

The conversation is never re-rendered: after a model turn, the tokens appended are the text the
template puts after an assistant message (e.g. "\\n" after <|im_end|>), the new messages and the
next generation prompt, found by rendering a small probe conversation and taking the difference.
"""

from typing import Any

from temper.agent.toolcall import tools_system_block
from temper.agent.tools.base import Tool
from temper.errors import TemperError
from temper.generation.protocol import ChatTokenizer

_SENTINEL = "\u2063TEMPER-SENTINEL\u2063"
_PROBE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


class ChatFormat:
    def __init__(self, tokenizer: ChatTokenizer, tools: list[Tool] | None = None) -> None:
        self.tok = tokenizer
        self.tools = tools or []
        schemas = [t.schema for t in self.tools]
        # Does the template render `tools` itself (Qwen2.5, Hermes)? If not, they go in the system prompt.
        self.native_tools = bool(schemas) and self.tools[0].name in self._render(_PROBE, schemas)
        self.tool_role = self._tool_role_supported()

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                gen: bool = False) -> str:
        return str(self.tok.apply_chat_template(messages, tools=tools, add_generation_prompt=gen, tokenize=False))

    def _tool_role_supported(self) -> bool:
        try:
            return "tool-probe" in self._render([*_PROBE, {"role": "assistant", "content": "a"},
                                                 {"role": "tool", "content": "tool-probe"}])
        except TemperError:
            return False

    def system_message(self, text: str) -> dict[str, str]:
        if self.tools and not self.native_tools:
            text = f"{text}\n\n{tools_system_block(self.tools)}" if text else tools_system_block(self.tools)
        return {"role": "system", "content": text}

    def observation_message(self, text: str, from_tool: bool) -> dict[str, str]:
        if from_tool and self.tool_role:
            return {"role": "tool", "content": text}
        if from_tool:
            return {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}
        return {"role": "user", "content": text}

    def render(self, messages: list[dict[str, Any]], gen: bool = True) -> str:
        schemas = [t.schema for t in self.tools] if self.native_tools else None
        return self._render(messages, schemas, gen)

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.tok.encode(self.render(messages, gen=True), add_special_tokens=False)

    def continuation_ids(self, new_messages: list[dict[str, Any]], model_ids: list[int]) -> list[int]:
        """Tokens to append after a model turn `model_ids`: the end of the assistant turn that the
        model did not generate itself, `new_messages`, and the next generation prompt."""
        probe = [*_PROBE, {"role": "assistant", "content": _SENTINEL}]
        closed = self._render(probe)
        follow = self._render(probe + new_messages, gen=True)
        if not follow.startswith(closed):
            raise TemperError("chat template: appending a message changes earlier text; cannot extend in place")
        tail = closed[closed.rindex(_SENTINEL) + len(_SENTINEL):]
        generated = self.tok.decode(model_ids[-1:], skip_special_tokens=False) if model_ids else ""
        if model_ids and model_ids[-1] in self.tok.eos_token_ids and tail.startswith(generated):
            tail = tail[len(generated):]  # the model already wrote its end-of-turn token
        return self.tok.encode(tail + follow[len(closed):], add_special_tokens=False)
