"""One episode's HTTP endpoint on 127.0.0.1: the OpenAI-compatible routes an agent program calls,
served by the current policy and recorded, and the exec/file routes of the episode's sandbox.

    GET  /v1/models                 one model, "policy" (any model name is accepted)
    POST /v1/chat/completions       messages, tools, tool_choice, response_format, logprobs, stream
    POST /v1/completions            one prompt (text or token ids)
    POST /v1/responses              input, instructions, tools, previous_response_id (this episode's)
    POST /exec    {"command", "timeout"}   -> {"exit_code", "stdout", "stderr"}   (bash -c, in /app)
    POST /files/read {"path"} -> {"content"};  POST /files/write {"path", "content"} -> {"ok": true}

Every route wants `Authorization: Bearer KEY`, the episode's key; once the episode ends the key is
refused (401) and the server stops. Sampling follows the agent config (temperature, top_p, the
turn and context budgets), not the harness: the trainer's logprobs must be those of the policy
it trains. A reply's `token_ids` and `prompt_token_ids` come back with `return_token_ids: true`.
"""

import asyncio
import contextlib
import json
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field

from temper.agent.config import AgentConfig
from temper.agent.episode import ToolRecord
from temper.envs.sandboxes import call, is_sandbox_crash
from temper.external.recorder import Recorder
from temper.generation import Completion, GenerationClient, RequestError, SamplingParams
from temper.serve.chat import split_tool_calls
from temper.serve.constraints import ConstraintError, structured_for
from temper.serve.responses_items import ResponsesRequest, input_messages, output_items, response_format
from temper.serve.schemas import ChatRequest, CompletionRequest, Lenient, describe_validation, error_body

MODEL = "policy"


class ExecRequest(Lenient):
    command: str = Field(min_length=1)
    timeout: float = Field(60.0, gt=0, le=600)


class FileRequest(Lenient):
    path: str = Field(min_length=1)
    content: str | None = None


class Refused(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.kind = status, param, kind


@dataclass
class EpisodeState:
    """What the endpoint knows of its episode and tells it back: calls, sandbox actions, failures."""

    client: GenerationClient
    tokenizer: Any
    env: Any
    agent: AgentConfig
    seed: int | None
    key: str = field(default_factory=lambda: f"sk-episode-{secrets.token_hex(16)}")
    recorder: Recorder = field(init=False)
    actions: list[ToolRecord] = field(default_factory=list)
    engine_error: str | None = None
    sandbox_crash: BaseException | None = None
    closed: bool = False
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # response id -> conversation
    messages: list[dict[str, Any]] = field(default_factory=list)  # the last chat conversation, with its reply
    # One model call at a time: whether a call extends the record depends on the one before it.
    calls_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.recorder = Recorder(self.tokenizer)


class _EmbeddedServer(uvicorn.Server):
    """uvicorn inside someone else's process: it leaves the signal handlers alone. (Its own swap them
    for its handler and restore them at exit, which, with episodes overlapping, leaves a finished
    server's handler installed: Ctrl-C would no longer reach `temper train`.)"""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class EpisodeEndpoint:
    """`async with EpisodeEndpoint(state) as ep:` -> ep.url (http://127.0.0.1:PORT); stopped on exit."""

    def __init__(self, state: EpisodeState):
        self.state = state
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task | None = None
        self.url = ""

    async def __aenter__(self) -> "EpisodeEndpoint":
        self.server = _EmbeddedServer(uvicorn.Config(build_app(self.state), host="127.0.0.1", port=0,
                                                    log_level="warning", lifespan="off", access_log=False))
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()  # it failed to start: raise why
            await asyncio.sleep(0.005)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.state.closed = True
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            try:
                await asyncio.wait_for(self.task, 10)
            except TimeoutError:
                self.task.cancel()


def build_app(st: EpisodeState) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return JSONResponse(error_body(str(exc), exc.param, exc.kind), exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = describe_validation(list(exc.errors()))
        return JSONResponse(error_body(message, param), 400)

    @app.middleware("http")
    async def auth(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        key = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if st.closed or not secrets.compare_digest(key.encode(), st.key.encode()):
            why = "the episode has ended" if st.closed and key == st.key else "not this episode's key"
            return JSONResponse(error_body(f"{request.method} {request.url.path}: {why} (each episode's "
                                           "endpoint takes only its own OPENAI_API_KEY, while it runs)",
                                           None, "authentication_error", "invalid_api_key"), 401)
        return await call_next(request)

    @app.get("/v1/models")
    async def models() -> Any:
        return {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "temper"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest) -> Any:
        data = await _chat(st, body, "chat")
        if not body.stream:
            return data
        return StreamingResponse(_one_chunk_stream(data), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest) -> Any:
        prompts = body.prompts()
        if len(prompts) != 1 or body.n != 1 or body.stream or body.echo:
            raise Refused(400, "prompt: the episode endpoint takes one prompt, n=1, no stream or echo", "prompt")
        p = prompts[0]
        ids = st.tokenizer.encode(p, add_special_tokens=True) if isinstance(p, str) else list(p)
        async with st.calls_lock:
            extends = st.recorder.completion_prompt(ids)
            t = time.monotonic()
            c = await _generate(st, ids, body, None)
            st.recorder.record("completions", ids, c, extends, time.monotonic() - t)
        text = st.tokenizer.decode(c.token_ids, skip_special_tokens=True)
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": c.finish_reason}
        if body.logprobs is not None:
            choice["logprobs"] = {"tokens": [st.tokenizer.decode([i]) for i in c.token_ids],
                                  "token_logprobs": list(c.logprobs)}
        if body.return_token_ids:
            choice.update(token_ids=c.token_ids, prompt_token_ids=ids)
        return {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "object": "text_completion", "created": int(time.time()),
                "model": body.model, "choices": [choice], "usage": _usage(ids, c)}

    @app.post("/v1/responses")
    async def responses(body: ResponsesRequest) -> Any:
        if body.stream:
            raise Refused(400, "stream: the episode endpoint answers the Responses API without streaming", "stream")
        history: list[dict[str, Any]] = []
        if body.previous_response_id is not None:
            if body.previous_response_id not in st.responses:
                raise Refused(404, f"previous_response_id: no response {body.previous_response_id!r} in this "
                                   "episode", "previous_response_id")
            history = st.responses[body.previous_response_id]
        try:
            messages = [*([{"role": "system", "content": body.instructions}] if body.instructions else []),
                        *[m for m in history if m["role"] != "system"], *input_messages(body.input)]
            req = ChatRequest.model_validate({
                "model": body.model, "messages": messages, "max_tokens": body.max_output_tokens,
                "tool_choice": body.tool_choice, "parallel_tool_calls": body.parallel_tool_calls,
                "response_format": response_format(body.text),
                "tools": [{"type": "function", "function": t.model_dump(exclude={"type"})} for t in body.tools]
                if body.tools else None})
        except (ValueError, KeyError) as exc:
            raise Refused(400, f"input: {exc}", "input") from None
        data = await _chat(st, req, "responses")
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        message = data["choices"][0]["message"]
        st.responses[rid] = [*messages, message]
        u = data["usage"]
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": body.model, "output": output_items(message, rid), "error": None, "incomplete_details": None,
                "instructions": body.instructions, "tools": [t.model_dump() for t in body.tools or []],
                "tool_choice": body.tool_choice or "auto", "parallel_tool_calls": body.parallel_tool_calls,
                "previous_response_id": body.previous_response_id,
                "text": body.text or {"format": {"type": "text"}},
                "usage": {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
                          "total_tokens": u["total_tokens"]}}

    @app.post("/exec")
    async def exec_(body: ExecRequest) -> Any:
        sb = _sandbox(st)
        t = time.monotonic()
        try:
            r = await call(sb.exec, body.command, timeout=body.timeout)
        except Exception as exc:
            raise _sandbox_failure(st, exc) from None
        out = {"exit_code": r.exit_code, "stdout": r.stdout.decode(errors="replace"),
               "stderr": r.stderr.decode(errors="replace")}
        st.actions.append(ToolRecord("exec", {"command": body.command}, json.dumps(out)[:2000], r.exit_code != 0,
                                     time.monotonic() - t))
        return out

    @app.post("/files/read")
    async def read(body: FileRequest) -> Any:
        sb = _sandbox(st)
        try:
            data = await call(sb.read_file, body.path)
        except Exception as exc:
            if is_sandbox_crash(exc):
                raise _sandbox_failure(st, exc) from None
            raise Refused(404, f"path: cannot read {body.path}: {exc}", "path") from None
        st.actions.append(ToolRecord("read_file", {"path": body.path}, "", False, 0.0))
        return {"content": data.decode(errors="replace")}

    @app.post("/files/write")
    async def write(body: FileRequest) -> Any:
        sb = _sandbox(st)
        try:
            await call(sb.write_file, body.path, body.content or "")
        except Exception as exc:
            if is_sandbox_crash(exc):
                raise _sandbox_failure(st, exc) from None
            raise Refused(400, f"path: cannot write {body.path}: {exc}", "path") from None
        st.actions.append(ToolRecord("write_file", {"path": body.path}, "", False, 0.0))
        return {"ok": True}

    return app


async def _chat(st: EpisodeState, body: ChatRequest, api: str) -> dict[str, Any]:
    if body.n != 1:
        raise Refused(400, "n: the episode endpoint samples one answer per call", "n")
    async with st.calls_lock:
        return await _chat_call(st, body, api)


async def _chat_call(st: EpisodeState, body: ChatRequest, api: str) -> dict[str, Any]:
    try:
        ids, tools, extends = await asyncio.to_thread(st.recorder.chat_prompt, body)
        structured, _ = structured_for(body, tools)
    except ConstraintError as exc:
        raise Refused(400, str(exc), exc.field) from None
    except ValueError as exc:
        raise Refused(400, f"messages: {exc}", "messages") from None
    t = time.monotonic()
    c = await _generate(st, ids, body, structured)
    text = st.tokenizer.decode(c.token_ids, skip_special_tokens=True)
    content, calls = split_tool_calls(text, tools) if tools else (text, [])
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    st.recorder.record(api, ids, c, extends, time.monotonic() - t, body, message)
    st.messages = [*[m.model_dump(exclude_none=True) for m in body.messages], message]
    choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None,
                              "finish_reason": "tool_calls" if calls else c.finish_reason}
    if body.logprobs:
        choice["logprobs"] = {"content": [{"token": st.tokenizer.decode([i]), "logprob": lp, "bytes": None,
                                           "top_logprobs": []} for i, lp in zip(c.token_ids, c.logprobs, strict=True)]}
    if body.return_token_ids:
        choice.update(token_ids=c.token_ids, prompt_token_ids=ids, policy_versions=list(c.versions))
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.model, "choices": [choice], "usage": _usage(ids, c)}


async def _generate(st: EpisodeState, ids: list[int], body: Any, structured: Any) -> Completion:
    a = st.agent
    room = a.max_context_tokens - len(ids)
    if room < 1:
        raise Refused(400, f"messages: the prompt ({len(ids)} tokens) fills the agent's context budget "
                           f"(agent.max_context_tokens={a.max_context_tokens})", "messages",
                      "context_length_exceeded")
    asked = getattr(body, "max_completion_tokens", None) or body.max_tokens or a.max_turn_tokens
    params = SamplingParams(temperature=a.temperature, top_p=a.top_p, max_tokens=max(1, min(asked, a.max_turn_tokens,
                                                                                           room)),
                            stop=list(body.stop or []), structured=structured,
                            seed=None if st.seed is None else st.seed + len(st.recorder.calls))
    try:
        async with asyncio.timeout(a.turn_timeout_s):
            c = await st.client.generate(ids, params)
    except RequestError as exc:
        raise Refused(400, str(exc), "messages") from None
    except Exception as exc:  # the policy failed: the episode is an infrastructure failure
        st.engine_error = f"generation failed: {type(exc).__name__}: {exc}"
        raise Refused(500, st.engine_error, None, "server_error") from None
    if c.finish_reason == "error":
        st.engine_error = f"generation failed: {c.error}"
        raise Refused(500, st.engine_error, None, "server_error")
    return c


def _usage(ids: list[int], c: Completion) -> dict[str, int]:
    n = len(c.token_ids)
    return {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}


async def _one_chunk_stream(data: dict[str, Any]) -> Any:
    """A non-streamed answer as a chat stream: the whole message in one delta, then the finish."""
    choice = data["choices"][0]
    head = {k: data[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    delta = {k: v for k, v in choice["message"].items() if v is not None}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    yield f"data: {json.dumps(head | {'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]})}\n\n"
    end = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    yield f"data: {json.dumps(head | {'choices': [end], 'usage': data['usage']})}\n\n"
    yield "data: [DONE]\n\n"


def _sandbox(st: EpisodeState) -> Any:
    sb = getattr(st.env, "sandbox", None)
    if sb is None:
        raise Refused(400, "this task has no sandbox: /exec and /files are for sandboxed (terminal) tasks", None)
    if st.sandbox_crash is not None:
        raise Refused(503, f"the episode's sandbox crashed: {st.sandbox_crash}", None, "server_error")
    return sb


def _sandbox_failure(st: EpisodeState, exc: BaseException) -> Refused:
    if is_sandbox_crash(exc):
        st.sandbox_crash = exc
        return Refused(503, f"the episode's sandbox crashed: {exc}", None, "server_error")
    return Refused(400, f"exec failed: {type(exc).__name__}: {exc}", None)
