"""The Responses API's request and items, as plain data: the body, its input items as chat
messages, a chat answer as output items. `responses_api.py` (temper serve) and the external-agent
endpoint both speak the API through these."""

import json
from typing import Any

from pydantic import Field

from temper.serve.schemas import Lenient


class ResponseTool(Lenient):
    type: str = "function"
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ResponsesRequest(Lenient):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[ResponseTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    text: dict[str, Any] | None = None  # {"format": {"type": "text" | "json_object" | "json_schema", ...}}
    previous_response_id: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    stream: bool = False
    store: bool = True
    metadata: dict[str, Any] | None = None
    user: str | None = None


def response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Responses API's `text.format` as chat's `response_format` (its json_schema fields sit flat)."""
    fmt = (text or {}).get("format")
    if not fmt or fmt.get("type") != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict", "description")
                                                   if k in fmt}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def input_messages(items: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses input items -> chat messages; raises ValueError naming the item at fault."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        kind = it.get("type", "message")
        if kind == "message" or ("role" in it and kind not in ("function_call", "function_call_output")):
            out.append({"role": it.get("role", "user"), "content": _text(it.get("content"))})
        elif kind == "function_call":
            call = {"id": it.get("call_id") or it.get("id"), "type": "function",
                    "function": {"name": it["name"], "arguments": it.get("arguments", "{}")}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls") is not None:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = it.get("output")
            out.append({"role": "tool", "tool_call_id": it.get("call_id"),
                        "content": output if isinstance(output, str) else json.dumps(output)})
        else:
            raise ValueError(f"input[{i}]: items of type {kind!r} are not supported")
    return out


def output_items(message: dict[str, Any], rid: str) -> list[dict[str, Any]]:
    items = []
    if message.get("content"):
        items.append({"type": "message", "id": f"msg_{rid[5:]}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for call in message.get("tool_calls") or []:
        items.append({"type": "function_call", "id": f"fc_{call['id'][5:]}", "call_id": call["id"],
                      "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                      "status": "completed"})
    return items
