"""Anthropic's Messages API (`POST /v1/messages`) for the agent harnesses that speak it, on top of chat
completions (the same admission, routing, usage and metrics): `system`, text / `tool_use` /
`tool_result` content blocks, `tools` with `input_schema`, `tool_choice`, `stop_sequences`, and
`stream` as Anthropic's event sequence (message_start ... content_block_delta ... message_stop)."""

import json
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from temper.serve.schemas import ChatRequest, Lenient, StreamOptions
from temper.serve.streaming import EventStream, chat_chunks

STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class MessagesTool(Lenient):
    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class MessagesRequest(Lenient):
    model: str
    max_tokens: int = Field(ge=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[MessagesTool] | None = None
    tool_choice: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    temperature: float = Field(1.0, ge=0, le=1)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0)
    stream: bool = False


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def chat_messages(body: MessagesRequest) -> list[dict[str, Any]]:
    """Anthropic messages (content blocks) -> chat messages; raises ValueError naming the block at fault."""
    out: list[dict[str, Any]] = [{"role": "system", "content": _text(body.system)}] if body.system else []
    for i, m in enumerate(body.messages):
        role, content = m.get("role"), m.get("content")
        if role not in ("user", "assistant"):
            raise ValueError(f"messages[{i}].role must be user or assistant, not {role!r}")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        text, calls = [], []
        for j, b in enumerate(blocks):
            kind = b.get("type")
            if kind == "text":
                text.append(b.get("text", ""))
            elif kind == "tool_use" and role == "assistant":
                calls.append({"id": b["id"], "type": "function",
                              "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})}})
            elif kind == "tool_result" and role == "user":
                out.append({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _text(b.get("content"))})
            else:
                raise ValueError(f"messages[{i}].content[{j}]: a {kind!r} block is not supported in a {role} turn")
        if text or calls:
            msg: dict[str, Any] = {"role": role, "content": "".join(text) or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    return out


def _tool_choice(choice: dict[str, Any] | None) -> Any:
    kind = (choice or {}).get("type", "auto")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice["name"]}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(kind, "auto")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for c in message.get("tool_calls") or []:
        out.append({"type": "tool_use", "id": "toolu_" + c["id"].removeprefix("call_"), "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"] or "{}")})
    return out


def add_messages_routes(app: FastAPI, server: Any) -> None:
    @app.post("/v1/messages")
    async def create(request: Request, body: MessagesRequest) -> Any:
        try:
            chat = ChatRequest.model_validate({
                "model": body.model, "messages": chat_messages(body), "max_tokens": body.max_tokens,
                "temperature": body.temperature, "top_p": body.top_p, "top_k": body.top_k,
                "stop": body.stop_sequences or None,
                "tool_choice": _tool_choice(body.tool_choice) if body.tools else None,
                "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                            "parameters": t.input_schema}} for t in body.tools]
                if body.tools else None})
        except (ValueError, KeyError) as exc:
            return JSONResponse({"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": f"messages: {exc}"}}, 400)
        mid = f"msg_{uuid.uuid4().hex[:24]}"
        if not body.stream:
            data = await server.answer(*await server.begin(request, chat, "chat", "messages"))
            choice, usage = data["choices"][0], data["usage"]
            return {"id": mid, "type": "message", "role": "assistant", "model": body.model,
                    "content": _blocks(choice["message"]), "stop_reason": STOP.get(choice["finish_reason"], "end_turn"),
                    "stop_sequence": None, "usage": {"input_tokens": usage["prompt_tokens"],
                                                     "output_tokens": usage["completion_tokens"]}}
        chat = chat.model_copy(update={"stream": True, "stream_options": StreamOptions(include_usage=True)})
        inner = await server.generate(request, chat, "chat", "messages")
        return EventStream(_events(body, mid, inner), also=inner)

    async def _events(body: MessagesRequest, mid: str, inner: Any) -> Any:
        def event(kind: str, **data: Any) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        yield event("message_start", message={"id": mid, "type": "message", "role": "assistant", "model": body.model,
                                              "content": [], "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 0, "output_tokens": 0}})
        opened, index, calls, finish, usage = False, 0, [], None, {}
        async for chunk in chat_chunks(inner):
            if "error" in chunk:
                yield event("error", error={"type": "api_error", "message": chunk["error"]["message"]})
                return
            usage = chunk.get("usage") or usage
            for ch in chunk.get("choices") or []:
                delta = ch.get("delta") or {}
                if delta.get("content"):
                    if not opened:
                        opened = True
                        yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
                    yield event("content_block_delta", index=0,
                                delta={"type": "text_delta", "text": delta["content"]})
                calls += delta.get("tool_calls") or []
                finish = ch.get("finish_reason") or finish
        if opened:
            yield event("content_block_stop", index=0)
            index = 1
        for k, c in enumerate(calls, index):
            block = {"type": "tool_use", "id": "toolu_" + c["id"].removeprefix("call_"), "name": c["function"]["name"],
                     "input": {}}
            yield event("content_block_start", index=k, content_block=block)
            yield event("content_block_delta", index=k,
                        delta={"type": "input_json_delta", "partial_json": c["function"]["arguments"]})
            yield event("content_block_stop", index=k)
        stop = STOP.get(finish or "stop", "end_turn")
        yield event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                    usage={"input_tokens": usage.get("prompt_tokens", 0),
                           "output_tokens": usage.get("completion_tokens", 0)})
        yield event("message_stop")
