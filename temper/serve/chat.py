"""Chat requests to prompt token ids (the model's chat template, tools included), and model text
back to OpenAI `tool_calls`, with the agent's Hermes-style parser (`<tool_call>{json}</tool_call>`)."""

import json
import uuid
from typing import Any

from temper.agent.toolcall import parse_tool_calls, strip_tool_calls, tools_system_block
from temper.agent.tools.base import Tool
from temper.serve.schemas import ChatRequest, Message, ToolSpec

_PROBE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def as_tools(specs: list[ToolSpec]) -> list[Tool]:
    """OpenAI tool specs as the agent's Tool objects (schema and argument checks; never called here)."""
    out = []
    for s in specs:
        params = dict(s.function.parameters or {})
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        out.append(Tool(s.function.name, s.function.description, params, fn=_never))
    return out


def _never(**_: Any) -> str:
    raise RuntimeError("tools are run by the API client, not by the server")


def _message(m: Message) -> dict[str, Any]:
    role = "system" if m.role == "developer" else m.role
    text = m.text()
    if m.tool_calls:  # an earlier assistant turn that called tools: render the calls as the model wrote them
        calls = []
        for c in m.tool_calls:
            args = c.function.arguments
            args = json.loads(args) if isinstance(args, str) and args.strip() else (args or {})
            calls.append("<tool_call>\n" + json.dumps({"name": c.function.name, "arguments": args},
                                                       ensure_ascii=False) + "\n</tool_call>")
        text = "\n".join([text, *calls]) if text else "\n".join(calls)
    return {"role": role, "content": text}


def chat_prompt_ids(tokenizer: Any, req: ChatRequest) -> tuple[list[int], list[Tool]]:
    """Token ids of the conversation plus the generation prompt, and the tools offered.
    Raises TemperError (template problems) or ValueError (bad tool-call arguments JSON)."""
    messages = [_message(m) for m in req.messages]
    tools = as_tools(req.tools) if req.tools and req.tool_choice != "none" else []
    schemas = [t.schema for t in tools]
    native = False
    if tools:
        # Templates that render `tools` themselves (Qwen2.5, Hermes) get them; others (SmolLM2) get
        # the same Hermes instructions in the system message, as the agent loop does.
        probe = str(tokenizer.apply_chat_template(_PROBE, tools=schemas, add_generation_prompt=False))
        native = tools[0].name in probe
        if not native:
            block = tools_system_block(tools)
            if messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{block}"}
            else:
                messages.insert(0, {"role": "system", "content": block})
    ids = tokenizer.apply_chat_template(messages, tools=schemas if native else None, add_generation_prompt=True,
                                        tokenize=True)
    return list(ids), tools


def split_tool_calls(text: str, tools: list[Tool]) -> tuple[str | None, list[dict[str, Any]]]:
    """(content without the call blocks, OpenAI tool_calls) for the calls that parse and name a known
    tool; malformed calls stay in the content, as text, for the client to see."""
    if not tools or "<tool_call>" not in text:
        return text, []
    calls = parse_tool_calls(text, {t.name: t for t in tools})
    good = [c for c in calls if c.well_formed]
    if not good:
        return text, []
    content = strip_tool_calls(text) or None
    out = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}} for c in good]
    return content, out
