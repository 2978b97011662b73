"""The OpenAI-compatible route layer, written once: chat completions, completions and the Responses
API over a `GenerationClient`, with OpenAI's envelopes, errors, logprobs and streaming.

    add_openai_routes(app, OpenAILayer(client, tokenizer))

Whoever serves it subclasses the layer and fills in its hooks: `admit` (model names, keys, budgets,
queues), `chat_prompt` (the prompt ids of a chat request), `sampling` (the parameters that run, e.g.
the episode endpoint's agent config instead of the request's), `submit` (start the generation; by
default one `client.generate` per sample, then `record`), `record` (a call came back: the episode
endpoint keeps its token record), `finish` and `refused` (serve's usage log). `temper serve`
(app.py) is this layer over its engine variants; the external-agent endpoint
(temper/external/endpoint.py) is it over the run's client.
"""

import asyncio
import uuid
from dataclasses import replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from temper.agent.tools.base import Tool
from temper.errors import TemperError
from temper.generation import GenerationClient, RequestError, SamplingParams
from temper.serve.chat import chat_prompt_ids
from temper.serve.constraints import ConstraintError, structured_for
from temper.serve.responses import Job
from temper.serve.runs import Run
from temper.serve.schemas import ChatRequest, CompletionRequest, Sampling, error_body
from temper.serve.streaming import EventStream, stream_job


class ApiError(Exception):
    """A request refused or failed: the OpenAI error body with this status (the app's handler sends it)."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = headers or {}


class OpenAILayer:
    def __init__(self, client: GenerationClient | None, tokenizer: Any, model_names: list[str],
                 max_tokens_default: int = 256, max_model_len: int | None = None):
        self.client, self.tokenizer, self.max_tokens_default = client, tokenizer, max_tokens_default
        self.model_names, self.max_model_len = model_names, max_model_len  # what GET /v1/models lists

    # ---- hooks ------------------------------------------------------------------------------
    async def admit(self, request: Request, body: Sampling, job: Job) -> None:
        """Refuse (ApiError) or let the request in; outside `refused`'s reach."""

    def chat_prompt(self, body: ChatRequest, job: Job) -> tuple[list[int], list[Tool]]:
        """Prompt ids and tools; TemperError or ValueError for a bad conversation. Runs in a worker thread."""
        return chat_prompt_ids(self.tokenizer, body)

    def sampling(self, body: Sampling, job: Job) -> SamplingParams:
        """The parameters that run; `job.params` holds what the request asked for."""
        return job.params

    async def submit(self, request: Request, body: Sampling, job: Job) -> Run:
        """One `client.generate` per sample, all done before the response starts (a failure is an HTTP
        error, never half a stream); then `record(body, job)`."""
        assert self.client is not None
        p = job.params
        per_sample = [replace(p, n=1, seed=None if p.seed is None else p.seed + i) for i in range(p.n)]
        try:
            done = await asyncio.gather(*(self.client.generate(ids, s) for ids in job.prompts for s in per_sample))
        except RequestError as exc:
            raise request_error(exc, job, "messages" if job.kind == "chat" else "prompt") from None
        except Exception as exc:  # the policy failed
            raise ApiError(500, f"generation failed: {type(exc).__name__}: {exc}", kind="server_error") from None
        for k, c in enumerate(done):
            c.index = k % p.n
            if not c.text and c.token_ids:  # a client that returns ids only
                c.text = self.tokenizer.decode(c.token_ids, skip_special_tokens=p.skip_special_tokens)
        if (error := next((c.error or "?" for c in done if c.finish_reason == "error"), None)) is not None:
            raise ApiError(500, f"generation failed: {error}", kind="server_error")
        for k, c in enumerate(done):
            job.seen(c, k // p.n)
        self.record(body, job)
        return Run.of([done[i * p.n:(i + 1) * p.n] for i in range(len(job.prompts))])

    def record(self, body: Sampling, job: Job) -> None:
        """A call through `submit`'s client came back (`job.done` holds its completions)."""

    def finish(self, job: Job, status: str, http_status: int = 200, error: str | None = None) -> None:
        """A begun generation ended: ok, error or aborted (the client went away)."""

    def refused(self, job: Job, exc: ApiError) -> None:
        """A request admitted, then refused before it ran (bad prompt, constraint, parameter)."""

    def invalid(self, request: Request, message: str) -> None:
        """A request whose body failed validation (nothing of it was parsed)."""

    # ---- the generation of one request ------------------------------------------------------------
    async def generate(self, request: Request, body: Sampling, kind: str, api: str = "") -> Response:
        job, run = await self.begin(request, body, kind, api)
        if body.stream:
            # as OpenAI: the final usage chunk only when stream_options.include_usage asks for it
            include = bool(body.stream_options and body.stream_options.include_usage)
            return EventStream(stream_job(job, run, self.finish, include), headers=job.headers)
        return JSONResponse(await self.answer(job, run), headers=job.headers)

    async def begin(self, request: Request, body: Sampling, kind: str, api: str = "") -> tuple[Job, Run]:
        """Admission, the prompt, the parameters and the generation's start: its job and run."""
        rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        job = Job(kind, rid, body.model, self.tokenizer, api or ("chat" if kind == "chat" else "completions"))
        await self.admit(request, body, job)
        try:
            return job, await self.start(request, body, job)
        except ApiError as exc:
            self.refused(job, exc)
            raise

    async def start(self, request: Request, body: Sampling, job: Job) -> Run:
        await self.prepare(body, job)
        job.params = self.sampling(body, job)
        return await self.submit(request, body, job)

    async def answer(self, job: Job, run: Run) -> dict[str, Any]:
        """Run a begun generation to its end; the OpenAI body."""
        status = "aborted"
        try:
            async for p, item in run:
                job.seen(item, p)
            status = "error" if job.error else "ok"
        finally:
            run.close()
            if status != "ok":
                self.finish(job, status, 500 if status == "error" else 499, job.error)
        if job.error:
            raise ApiError(500, job.error, kind="server_error", headers=job.headers)
        out = job.body()
        self.finish(job, "ok")
        return out

    async def prepare(self, body: Sampling, job: Job) -> None:
        """The request's prompts, tools, constraint and parameters, on the job; ApiError 400 naming the field."""
        tok, field = self.tokenizer, "prompt"
        try:
            if isinstance(body, ChatRequest):
                field = "messages"
                ids, job.tools = await asyncio.to_thread(self.chat_prompt, body, job)
                job.prompts, job.content = [ids], [m.model_dump(exclude_none=True) for m in body.messages]
                job.logprobs = (body.top_logprobs or 0) if body.logprobs else None
            else:
                assert isinstance(body, CompletionRequest)
                if (problem := body.echo_problem()) is not None:
                    raise ApiError(400, problem[1], problem[0])
                job.prompts = [tok.encode(p, add_special_tokens=True) if isinstance(p, str) else list(p)
                               for p in body.prompts()]
                job.content, job.logprobs = body.prompt, body.logprobs
                job.echo, job.prompt_logprobs = body.echo, body.prompt_logprobs
        except (TemperError, ValueError) as exc:
            raise ApiError(400, f"{field}: {exc}", field) from None
        try:
            structured, job.structured_field = structured_for(body, job.tools)
        except ConstraintError as exc:
            raise ApiError(400, str(exc), exc.field) from None
        max_tokens = getattr(body, "max_completion_tokens", None) or body.max_tokens or self.max_tokens_default
        job.echo_only = getattr(body, "max_tokens", None) == 0  # echo, max_tokens 0: one token made, then dropped
        job.return_token_ids = body.return_token_ids
        top = max(job.logprobs or 0, job.prompt_logprobs or 0)
        job.params = SamplingParams(
            temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, min_p=body.min_p,
            repetition_penalty=body.repetition_penalty, presence_penalty=body.presence_penalty,
            frequency_penalty=body.frequency_penalty, seed=body.seed, max_tokens=1 if job.echo_only else max_tokens,
            n=body.n, stop=list(body.stop or []), stop_token_ids=body.stop_token_ids, ignore_eos=body.ignore_eos,
            skip_special_tokens=body.skip_special_tokens, logprobs=top,
            prompt_logprobs=bool(getattr(body, "scores_prompt", False)), structured=structured)


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.param, exc.kind, exc.code), exc.status, exc.headers)


def request_error(exc: RequestError, job: Job, default: str) -> ApiError:
    """A 400 for an engine's RequestError, naming the request's own field ('sampling_params.top_k=...' -> top_k)."""
    message, param = str(exc), default
    if "sampling_params." in message:
        param = message.split("sampling_params.", 1)[1].split("=", 1)[0].split(" ", 1)[0]
    if "sampling_params.structured" in message:  # the request's constraint field, not the engine's
        message = f"{job.structured_field}: {message.split(': ', 2)[-1]}"
        param = job.structured_field
    return ApiError(400, message, param)
