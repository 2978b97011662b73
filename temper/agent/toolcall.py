"""Tool calls in the Hermes/Qwen convention: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.

Parsing never raises: every malformed call (bad JSON, no name, unknown tool, bad arguments)
becomes a `ToolCall` with an `error` that tells the model what to fix.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

from temper.agent.tools.base import Tool

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
EXAMPLE = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'


@dataclass
class ToolCall:
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set when the call cannot run; the message is for the model
    raw: str = ""
    well_formed: bool = False  # valid JSON naming a known tool (its arguments may still fail their schema)


def _decode(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    # Models often wrap the JSON in a code fence or add a trailing brace; try the first object.
    raw = raw.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    obj, _ = json.JSONDecoder().raw_decode(raw)
    return obj


def parse_tool_calls(text: str, tools: dict[str, Tool]) -> list[ToolCall]:
    calls = []
    for i, m in enumerate(_CALL.finditer(text), 1):
        raw = m.group(1).strip()
        call = ToolCall(raw=raw)
        calls.append(call)
        where = f"tool call {i}"
        try:
            obj = _decode(raw)
        except (json.JSONDecodeError, ValueError) as exc:
            call.error = f"{where} is not valid JSON ({exc}). Write it exactly like:\n{EXAMPLE}"
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            call.error = f'{where} needs a "name" (string) and "arguments" (object), like:\n{EXAMPLE}'
            continue
        call.name = obj["name"]
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # OpenAI style: arguments as a JSON string
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as exc:
                call.error = f"{where}: arguments of {call.name} are not valid JSON ({exc})"
                continue
        if call.name not in tools:
            call.error = f"unknown tool {call.name!r}; available tools: {', '.join(sorted(tools)) or 'none'}"
            continue
        call.well_formed = True
        call.error = tools[call.name].check(args)
        call.arguments = args if isinstance(args, dict) else {}
    return calls


def strip_tool_calls(text: str) -> str:
    """The text without its tool-call blocks (an unclosed last block runs to the end, as when parsing)."""
    return _CALL.sub("", text).strip()


def tools_system_block(tools: list[Tool]) -> str:
    """Qwen2.5/Hermes tool instructions, for chat templates that do not render `tools` themselves."""
    lines = "\n".join(json.dumps(t.schema, ensure_ascii=False) for t in tools)
    return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{lines}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')

