"""Server-sent events in the OpenAI format: `data: {chunk}` lines, a final usage chunk when asked, `data: [DONE]`.

Text is streamed by decoding each sample's tokens so far and sending what is new, minus a tail
that could still become a stop string (the engine cuts stop strings from the final text) or an
incomplete UTF-8 character. With tools offered, a chat answer is sent whole at the end, so that
a `<tool_call>` block reaches the client as `tool_calls`, never as half-written text.
"""

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from temper.generation import Completion, TokenEvent
from temper.serve.chat import split_tool_calls
from temper.serve.responses import Job
from temper.serve.runs import Run
from temper.serve.schemas import error_body

Finish = Callable[[Job, str, int, str | None], None]  # (job, status, HTTP status, error): the layer's bookkeeping


class EventStream(StreamingResponse):
    """A `text/event-stream` response that closes its generators when it ends, however it ends.

    A client that goes away while a chunk is being sent leaves the generator suspended at its
    `yield`, where no cancellation reaches it: until garbage collection its engine requests would
    keep running and count as in flight. `also` names the inner response a re-emitting stream
    (Responses, Messages) reads from, closed after it."""

    def __init__(self, events: AsyncIterator[bytes], headers: dict[str, str] | None = None,
                 also: StreamingResponse | None = None):
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self.also = also

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                for stream in (self, self.also):
                    if stream is not None:
                        await stream.body_iterator.aclose()  # type: ignore[attr-defined]


async def chat_chunks(response: Any) -> AsyncIterator[dict[str, Any]]:
    """The chunks of a streamed chat completion (one of ours) parsed back: the Responses and Messages
    APIs re-emit one chat stream in their own event formats."""
    async for raw in response.body_iterator:
        for line in (raw.decode() if isinstance(raw, bytes) else raw).splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


def sse(data: dict[str, Any] | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n".encode()


class _Sample:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self.sent = ""  # text already sent
        self.first = True


def _safe(text: str, stops: list[str]) -> str:
    """The part of `text` that no later token can change: before any stop string, minus a tail
    that may be a stop string's beginning, minus a trailing replacement char (a split UTF-8 byte)."""
    for s in stops:
        if s in text:
            text = text[:text.find(s)]
    hold = max((len(s) - 1 for s in stops), default=0)
    text = text[:len(text) - hold] if hold else text
    return text.rstrip("\ufffd")


async def stream_job(job: Job, run: Run, finish: Finish, include_usage: bool = False) -> AsyncIterator[bytes]:
    tok, chat = job.tokenizer, job.kind == "chat"
    obj = "chat.completion.chunk" if chat else "text_completion"
    samples: dict[int, _Sample] = {}
    status, error = "aborted", None

    def chunk(index: int, delta: dict[str, Any] | str, finish: str | None = None,
              logprobs: Any = None, extra: dict[str, Any] | None = None) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if chat:
            choice["delta"] = delta
        else:
            choice["text"] = delta
        choice.update({"logprobs": logprobs, "finish_reason": finish, **(extra or {})})
        return sse({"id": job.rid, "object": obj, "created": job.created, "model": job.model, "choices": [choice]})

    try:
        async for p, item in run:
            idx = job.seen(item, p)
            s = samples.setdefault(idx, _Sample())
            if chat and s.first:
                s.first = False
                yield chunk(idx, {"role": "assistant", "content": ""})
            if isinstance(item, TokenEvent):
                s.ids.append(item.token_id)
                if job.tools and chat:
                    continue
                text = _safe(tok.decode(s.ids, skip_special_tokens=job.params.skip_special_tokens),
                             job.params.stop)
                new = text[len(s.sent):] if text.startswith(s.sent) else ""
                tops = [item.top_logprobs] if item.top_logprobs else []
                lp = (job.chat_logprobs([item.token_id], [item.logprob], tops) if chat else
                      {"tokens": [job.token_text(item.token_id)], "token_logprobs": [item.logprob],
                       "top_logprobs": [{job.token_text(k): v for k, v in item.top_logprobs.items()}]
                       if item.top_logprobs else None, "text_offset": [len(s.sent)]}) \
                    if job.logprobs is not None else None
                if new or lp is not None:
                    s.sent += new
                    yield chunk(idx, {"content": new} if chat else new, logprobs=lp)
                continue
            c: Completion = item
            if c.finish_reason == "error":
                error = c.error or "generation failed"
                yield sse(error_body(error, None, "server_error"))
                status = "error"
                return
            rest = c.text[len(s.sent):] if c.text.startswith(s.sent) else ""
            rl = job.rl_fields(c)
            if chat:
                content, calls = split_tool_calls(c.text, job.tools) if job.tools else (rest, [])
                delta: dict[str, Any] = {"content": content if job.tools else rest}
                if calls:
                    delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(calls)]
                yield chunk(idx, delta, job.finish_reason(c, calls), extra=rl)
            else:
                yield chunk(idx, rest, job.finish_reason(c), extra=rl)
        status = "ok"
        if include_usage:
            yield sse({"id": job.rid, "object": obj, "created": job.created, "model": job.model, "choices": [],
                       "usage": job.usage()})
        yield sse("[DONE]")
    finally:
        run.close()
        finish(job, status, 200 if status == "ok" else 499 if status == "aborted" else 500, error)
