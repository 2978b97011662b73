"""One episode's HTTP endpoint on 127.0.0.1: serve's OpenAI-compatible route layer over the run's
client, recorded, plus the exec/file routes of the episode's sandbox (sandbox_routes.py).

    GET  /v1/models                 one model, "policy" (any model name is accepted)
    POST /v1/chat/completions       messages, tools, tool_choice, response_format, logprobs, stream
    POST /v1/completions            one prompt (text or token ids)
    POST /v1/responses              input, instructions, tools, previous_response_id (this episode's), stream
    POST /exec, /files/read, /files/write

Every route wants `Authorization: Bearer KEY`, the episode's key; once the episode ends the key is
refused (401) and the server stops. Sampling follows the agent config (temperature, top_p, the
turn and context budgets), not the harness: the trainer's logprobs must be those of the policy
it trains, so a request that constrains sampling is refused (400 naming the field) unless
agent.constrained_requests is `mark`. A reply's `token_ids` and `prompt_token_ids` come back with
`return_token_ids: true`.
"""

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

from temper.agent.config import AgentConfig
from temper.agent.episode import ToolRecord
from temper.agent.tools.base import Tool
from temper.agent.tools.builtin import settle
from temper.external.recorder import Recorder
from temper.external.sandbox_routes import add_sandbox_routes
from temper.generation import GenerationClient, SamplingParams
from temper.sandbox.aio import call
from temper.serve.constraints import ConstraintError, GrammarLimits, check_limits
from temper.serve.layer import ApiError, OpenAILayer, error_response
from temper.serve.responses import Job
from temper.serve.routes import add_openai_routes
from temper.serve.runs import Run
from temper.serve.schemas import ChatRequest, CompletionRequest, Sampling

MODEL = "policy"


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
    messages: list[dict[str, Any]] = field(default_factory=list)  # the last chat conversation, with its reply
    # One model call at a time: whether a call extends the record depends on the one before it.
    calls_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The agent phase's end (time.monotonic()): no /exec command outlives it. `pending`: sandbox calls
    # still running (their request may be gone with the program), interrupted and waited for before the verifier.
    deadline: float | None = None
    pending: set[Any] = field(default_factory=set)
    exec_interrupted: bool = False  # a command the program left running was killed when it exited

    def __post_init__(self) -> None:
        self.recorder = Recorder(self.tokenizer)


class EpisodeLayer(OpenAILayer):
    """The route layer over the run's client: one call at a time, its prompt continued from the record,
    its sampling the agent config's, every call recorded. `job.record`: whether it extends the record."""

    def __init__(self, st: EpisodeState):
        super().__init__(st.client, st.tokenizer, [MODEL], st.agent.max_turn_tokens)
        self.st = st

    async def begin(self, request: Request, body: Sampling, kind: str, api: str = "") -> tuple[Job, Run]:
        async with self.st.calls_lock:
            return await super().begin(request, body, kind, api)

    async def admit(self, request: Request, body: Sampling, job: Job) -> None:
        if body.n != 1:
            raise ApiError(400, "n: the episode endpoint samples one answer per call", "n")
        if isinstance(body, CompletionRequest) and (len(body.prompts()) != 1 or body.echo):
            raise ApiError(400, "prompt: the episode endpoint takes one prompt, without echo", "prompt")

    def chat_prompt(self, body: ChatRequest, job: Job) -> tuple[list[int], list[Tool]]:
        ids, tools, job.record = self.st.recorder.chat_prompt(body)
        return ids, tools

    def sampling(self, body: Sampling, job: Job) -> SamplingParams:
        """The agent config's sampling; of the request only its stop strings, logprobs and a shorter
        max_tokens count (none of them changes the distribution a token is drawn from). A constraint
        (serve's: response_format, a forcing tool_choice, structured_outputs) would: it is refused, or
        with agent.constrained_requests=mark it runs and `record` flags the call (kept out of the loss)."""
        a, ids, asked = self.st.agent, job.prompts[0], job.params
        if asked.structured is not None and a.constrained_requests == "refuse":
            name = constraint_field(job)
            raise ApiError(400, f"{name}: the episode endpoint samples the policy unconstrained (a constrained "
                                "answer's logprobs are over the allowed tokens only, not the policy's; "
                                "agent.constrained_requests=mark allows it and keeps the call out of the loss)", name)
        if asked.structured is not None:  # marked: it runs, within serve's bounds on a constraint's size and nesting
            name, limits = constraint_field(job), GrammarLimits()
            try:
                check_limits(asked.structured, name, limits.max_bytes, limits.max_depth)
            except ConstraintError as exc:
                raise ApiError(400, str(exc), name) from None
        where = "messages" if job.kind == "chat" else "prompt"
        room = a.max_context_tokens - len(ids)
        if room < 1:
            raise ApiError(400, f"{where}: the prompt ({len(ids)} tokens) fills the agent's context budget "
                                f"(agent.max_context_tokens={a.max_context_tokens})", where, "context_length_exceeded")
        seed = None if self.st.seed is None else self.st.seed + len(self.st.recorder.calls)
        return SamplingParams(temperature=a.temperature, top_p=a.top_p,
                              max_tokens=max(1, min(asked.max_tokens, a.max_turn_tokens, room)), stop=asked.stop,
                              structured=asked.structured, logprobs=asked.logprobs, seed=seed)

    async def submit(self, request: Request, body: Sampling, job: Job) -> Run:
        if job.kind == "completion":
            job.record = self.st.recorder.completion_prompt(job.prompts[0])
        try:
            async with asyncio.timeout(self.st.agent.turn_timeout_s):
                return await super().submit(request, body, job)
        except TimeoutError:
            raise ApiError(500, f"generation failed: no answer within agent.turn_timeout_s="
                                f"{self.st.agent.turn_timeout_s}", kind="server_error") from None

    def record(self, body: Sampling, job: Job) -> None:
        chat = isinstance(body, ChatRequest)
        reply = job.message(0) if chat else None
        self.st.recorder.record(job.api, job.prompts[0], job.done[0], job.record, time.perf_counter() - job.start,
                                body if chat else None, reply,
                                constrained=constraint_field(job) if job.params.structured is not None else "")
        if chat:
            self.st.messages = [*job.content, reply]

    def refused(self, job: Job, exc: ApiError) -> None:
        if exc.status >= 500:  # the policy failed: the episode is an infrastructure failure
            self.st.engine_error = exc.message


def constraint_field(job: Job) -> str:
    """The request field a call's constraint came from, as the program wrote it (Responses: text.format)."""
    if job.api == "responses" and job.structured_field == "response_format":
        return "text.format"
    return job.structured_field


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
        sandbox = getattr(self.state.env, "sandbox", None)
        if self.state.pending and sandbox is not None:  # the program has gone: so does the command it left running
            self.state.exec_interrupted = await call(sandbox.interrupt)
        crash = await settle(self.state.pending)
        if crash is not None and self.state.sandbox_crash is None:
            self.state.sandbox_crash = crash
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            try:
                await asyncio.wait_for(self.task, 10)
            except TimeoutError:
                self.task.cancel()


def build_app(st: EpisodeState) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    add_openai_routes(app, EpisodeLayer(st))
    add_sandbox_routes(app, st)

    @app.middleware("http")
    async def auth(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        key = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if st.closed or not secrets.compare_digest(key.encode(), st.key.encode()):
            why = "the episode has ended" if st.closed and key == st.key else "not this episode's key"
            return error_response(ApiError(401, f"{request.method} {request.url.path}: {why} (each episode's "
                                           "endpoint takes only its own OPENAI_API_KEY, while it runs)",
                                           kind="authentication_error", code="invalid_api_key"))
        return await call_next(request)

    return app
