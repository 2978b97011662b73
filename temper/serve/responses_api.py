"""OpenAI's Responses API (`POST /v1/responses`, `GET /v1/responses/{id}`), on top of chat completions:
a request becomes a chat conversation (instructions as the system turn, the stored conversation of
`previous_response_id` first, function calls and their outputs as assistant/tool turns), runs through
the same admission, routing, usage and metrics as /v1/chat/completions, and comes back as output
items (`message` with `output_text`, `function_call`). With `stream`, the chat stream is re-emitted
as the documented event sequence, token by token. Stored responses live as long as the server (the
last `STORE` of them).
"""

import json
import time
import uuid
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from temper.serve.responses_items import ResponsesRequest, input_messages, output_items, response_format
from temper.serve.schemas import ChatRequest, StreamOptions, error_body
from temper.serve.streaming import EventStream, chat_chunks

STORE = 1024


def _usage(u: dict[str, Any]) -> dict[str, Any]:
    return {"input_tokens": u.get("prompt_tokens", 0), "output_tokens": u.get("completion_tokens", 0),
            "total_tokens": u.get("total_tokens", 0),
            "input_tokens_details": {"cached_tokens": (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)},
            "output_tokens_details": {"reasoning_tokens": 0}}


def add_responses_routes(app: FastAPI, layer: Any) -> None:
    """The Responses routes of `layer` (an OpenAILayer); its stored responses live with the app."""
    stored: OrderedDict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = OrderedDict()

    def envelope(body: ResponsesRequest, rid: str, status: str, output: list, usage: dict | None,
                 finish: str | None = None) -> dict[str, Any]:
        incomplete = {"reason": "max_output_tokens"} if finish == "length" else None
        return {"id": rid, "object": "response", "created_at": int(time.time()),
                "status": "incomplete" if incomplete and status == "completed" else status,
                "model": body.model, "output": output, "usage": usage, "error": None,
                "incomplete_details": incomplete, "instructions": body.instructions,
                "tools": [t.model_dump() for t in body.tools or []], "tool_choice": body.tool_choice or "auto",
                "parallel_tool_calls": body.parallel_tool_calls, "temperature": body.temperature, "top_p": body.top_p,
                "max_output_tokens": body.max_output_tokens, "previous_response_id": body.previous_response_id,
                "text": body.text or {"format": {"type": "text"}}, "metadata": body.metadata or {}, "store": body.store}

    def remember(rid: str, messages: list[dict[str, Any]], output: list[dict[str, Any]], resp: dict) -> None:
        turn = {"role": "assistant", "content": "".join(c["text"] for it in output if it["type"] == "message"
                                                        for c in it["content"]) or None}
        calls = [{"id": it["call_id"], "type": "function", "function": {"name": it["name"],
                                                                         "arguments": it["arguments"]}}
                 for it in output if it["type"] == "function_call"]
        if calls:
            turn["tool_calls"] = calls
        stored[rid] = ([*messages, turn], resp)
        while len(stored) > STORE:
            stored.popitem(last=False)

    @app.get("/v1/responses/{response_id}")
    async def get_response(response_id: str) -> Any:
        if response_id not in stored:
            return JSONResponse(error_body(f"no response {response_id!r} is stored here", "response_id",
                                           code="not_found"), 404)
        return stored[response_id][1]

    @app.post("/v1/responses")
    async def create(request: Request, body: ResponsesRequest) -> Any:
        history: list[dict[str, Any]] = []
        if body.previous_response_id is not None:
            if body.previous_response_id not in stored:
                return JSONResponse(error_body(
                    f"previous_response_id: no response {body.previous_response_id!r} is stored here (stored "
                    f"responses live as long as the server, the last {STORE})", "previous_response_id",
                    code="previous_response_not_found"), 404)
            history = stored[body.previous_response_id][0]
        try:
            messages = [*([{"role": "system", "content": body.instructions}] if body.instructions else []),
                        *[m for m in history if m["role"] != "system"], *input_messages(body.input)]
            chat = ChatRequest.model_validate({
                "model": body.model, "messages": messages, "temperature": body.temperature, "top_p": body.top_p,
                "max_tokens": body.max_output_tokens, "user": body.user, "tool_choice": body.tool_choice,
                "parallel_tool_calls": body.parallel_tool_calls, "response_format": response_format(body.text),
                "tools": [{"type": "function", "function": t.model_dump(exclude={"type"})} for t in body.tools]
                if body.tools else None})
        except (ValueError, KeyError) as exc:
            return JSONResponse(error_body(f"input: {exc}", "input"), 400)
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        if not body.stream:
            job, run = await layer.begin(request, chat, "chat", "responses")
            data = await layer.answer(job, run)
            choice = data["choices"][0]
            output = output_items(choice["message"], rid)
            out = envelope(body, rid, "completed", output, _usage(data["usage"]), choice["finish_reason"])
            if body.store:
                remember(rid, messages, output, out)
            return JSONResponse(out, headers=job.headers)
        chat = chat.model_copy(update={"stream": True, "stream_options": StreamOptions(include_usage=True)})
        inner = await layer.generate(request, chat, "chat", "responses")
        return EventStream(_events(body, rid, inner, messages), also=inner)

    async def _events(body: ResponsesRequest, rid: str, inner: Any, messages: list[dict[str, Any]]) -> Any:
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            seq += 1
            return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq - 1, **fields})}\n\n" \
                .encode()

        start = envelope(body, rid, "in_progress", [], None)
        yield event("response.created", response=start)
        yield event("response.in_progress", response=start)
        text, calls, usage, finish, opened = "", [], None, None, False
        msg_id = f"msg_{rid[5:]}"
        async for chunk in chat_chunks(inner):
            if "error" in chunk:
                failed = envelope(body, rid, "failed", [], None)
                failed["error"] = {"code": "server_error", "message": chunk["error"]["message"]}
                yield event("response.failed", response=failed)
                return
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            for ch in chunk.get("choices") or []:
                delta = ch.get("delta") or {}
                if delta.get("content"):
                    if not opened:
                        opened = True
                        yield event("response.output_item.added", output_index=0, item={
                            "type": "message", "id": msg_id, "status": "in_progress", "role": "assistant",
                            "content": []})
                        yield event("response.content_part.added", item_id=msg_id, output_index=0,
                                    content_index=0, part={"type": "output_text", "text": "", "annotations": []})
                    text += delta["content"]
                    yield event("response.output_text.delta", item_id=msg_id, output_index=0, content_index=0,
                                delta=delta["content"], logprobs=[])
                calls += delta.get("tool_calls") or []
                finish = ch.get("finish_reason") or finish
        output = output_items({"content": text, "tool_calls": [{"id": c["id"], "function": c["function"]}
                                                         for c in calls]}, rid)
        if opened:
            part = {"type": "output_text", "text": text, "annotations": []}
            yield event("response.output_text.done", item_id=msg_id, output_index=0, content_index=0, text=text,
                        logprobs=[])
            yield event("response.content_part.done", item_id=msg_id, output_index=0, content_index=0, part=part)
            yield event("response.output_item.done", output_index=0, item=output[0])
        for k, item in enumerate(output[1 if opened else 0:], 1 if opened else 0):
            yield event("response.output_item.added", output_index=k, item={**item, "status": "in_progress",
                                                                            "arguments": ""})
            yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=k,
                        delta=item["arguments"])
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=k,
                        arguments=item["arguments"])
            yield event("response.output_item.done", output_index=k, item=item)
        done = envelope(body, rid, "completed", output, usage, finish)
        if body.store:
            remember(rid, messages, output, done)
        yield event("response.incomplete" if done["status"] == "incomplete" else "response.completed", response=done)
