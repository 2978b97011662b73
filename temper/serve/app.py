"""The FastAPI app: OpenAI-compatible routes in front of the shared engine.

    app = create_app(ServeConfig(model="smollm2-135m"))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Admission is bounded (`queue.max_requests` in flight; beyond it 429 + Retry-After), a bad
request is a 400 naming its field, and a request that fails in the engine fails alone (500 for
it, the others keep running). Every request, refused ones included, leaves a usage record.
"""

import asyncio
import logging
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from temper.errors import TemperError
from temper.generation import RequestError, SamplingParams, default_served_name
from temper.runtime import resolve_device
from temper.serve.chat import chat_prompt_ids
from temper.serve.config import ServeConfig
from temper.serve.constraints import ConstraintError, structured_for
from temper.serve.messages_api import add_messages_routes
from temper.serve.metrics import Metrics
from temper.serve.responses import Job
from temper.serve.responses_api import add_responses_routes
from temper.serve.rl_routes import add_rl_routes
from temper.serve.router import Router, UnknownModel, split_model
from temper.serve.schemas import (
    ChatRequest,
    CompletionRequest,
    LoadWeightsRequest,
    Sampling,
    describe_validation,
    error_body,
)
from temper.serve.streaming import EventStream, stream_job
from temper.serve.tokenize_routes import add_tokenizer_routes
from temper.serve.usage import UsageLog, UsageRecord, key_id
from temper.serve.variants import Variants

log = logging.getLogger("temper.serve")


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = headers or {}


def served_name(cfg: ServeConfig) -> str:
    return cfg.served_name or default_served_name(cfg.model)


class Server:
    def __init__(self, cfg: ServeConfig, variants: Variants):
        self.cfg, self.variants = cfg, variants
        self.name = served_name(cfg)
        self.router = Router(cfg.routing)
        self.metrics = Metrics(variants)
        self.usage = UsageLog(cfg.usage, self.metrics)
        self.reserving = 0  # requests between admission and the engine (their prompts being prepared)
        self.draining = False
        self.open = asyncio.Event()  # cleared while paused (/pause): new requests wait for /resume
        self.open.set()

    def admit(self, key: str) -> None:
        """Budget and queue checks; raises the 429 (or 503 while shutting down)."""
        if self.draining:
            raise ApiError(503, "the server is shutting down", code="shutting_down", kind="server_error")
        if (why := self.usage.budgets.refusal(key)) is not None:
            self.metrics.rejected.labels(reason="budget").inc()
            raise ApiError(429, f"budget exceeded: {why}", code="budget_exceeded", kind="rate_limit_error",
                           headers={"Retry-After": str(_seconds_to_utc_midnight())})
        busy = self.variants.inflight + self.reserving
        if busy >= self.cfg.queue.max_requests:
            self.metrics.rejected.labels(reason="queue_full").inc()
            raise ApiError(429, f"server busy: {busy} requests in flight (queue.max_requests="
                           f"{self.cfg.queue.max_requests}); retry later", code="queue_full",
                           kind="rate_limit_error", headers={"Retry-After": str(self.cfg.queue.retry_after_s)})

    async def generate(self, request: Request, body: Sampling, kind: str) -> Response:
        job, run, headers = await self.begin(request, body, kind)
        if body.stream:
            # as OpenAI: the final usage chunk only when stream_options.include_usage asks for it
            include = bool(body.stream_options and body.stream_options.include_usage)
            return EventStream(stream_job(job, run, self.usage, include), headers=headers)
        return JSONResponse(await self.answer(job, run, headers), headers=headers)

    async def begin(self, request: Request, body: Sampling, kind: str) -> tuple[Job, Any, dict[str, str]]:
        """Admission, routing and the engine requests of one generation; its job, run and response headers.
        Waits while the server is paused."""
        await self.open.wait()
        try:
            requested = split_model(body.model, self.name)
        except UnknownModel as exc:
            raise ApiError(404, str(exc), param="model", code="model_not_found") from None
        api_key = request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None
        key = key_id(api_key)
        rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        record = UsageRecord(rid, kind, body.model, "standard", "none", key)
        try:
            self.admit(key)
        except ApiError as exc:
            record.status, record.http_status, record.error = "rejected", exc.status, exc.message
            self.usage.finish(record)
            raise
        self.reserving += 1
        try:
            job, run = await self._start(request, body, kind, requested, key, rid, record)
        finally:
            self.reserving -= 1
        return job, run, {"X-Variant": job.record.variant, "X-Route-Reason": job.record.route_reason,
                          "X-Request-Id": rid}

    async def answer(self, job: Job, run: Any, headers: dict[str, str]) -> dict[str, Any]:
        """Run a begun generation to its end; the OpenAI body (its usage recorded)."""
        status = "aborted"
        try:
            async for p, item in run:
                job.seen(item, p)
            status = "error" if job.error else "ok"
        finally:
            run.close()
            if status != "ok":
                job.finish(self.usage, status, 500 if status == "error" else 499, job.error)
        if job.error:
            raise ApiError(500, job.error, kind="server_error", headers=headers)
        out = job.body()
        job.finish(self.usage, "ok")
        return out

    async def _start(self, request: Request, body: Sampling, kind: str, requested: str, key: str, rid: str,
                     record: UsageRecord) -> tuple[Job, Any]:
        tok = self.variants.tokenizer
        tools, field = [], "prompt"
        try:
            if isinstance(body, ChatRequest):
                field = "messages"
                ids, tools = await asyncio.to_thread(chat_prompt_ids, tok, body)
                prompts, content = [ids], [m.model_dump(exclude_none=True) for m in body.messages]
                logprobs = (body.top_logprobs or 0) if body.logprobs else None
            else:
                assert isinstance(body, CompletionRequest)
                if (problem := body.echo_problem()) is not None:
                    raise self._reject(record, 400, problem[1], problem[0])
                prompts = [tok.encode(p, add_special_tokens=True) if isinstance(p, str) else list(p)
                           for p in body.prompts()]
                content, logprobs = body.prompt, body.logprobs
        except (TemperError, ValueError) as exc:
            raise self._reject(record, 400, f"{field}: {exc}", field) from None
        try:
            structured, structured_field = structured_for(body, tools)
        except ConstraintError as exc:
            raise self._reject(record, 400, str(exc), exc.field) from None
        max_tokens = (getattr(body, "max_completion_tokens", None) or body.max_tokens
                      or self.cfg.max_tokens_default)
        echo_only = getattr(body, "max_tokens", None) == 0  # echo, max_tokens 0: one token is made, then dropped
        scores_prompt = bool(getattr(body, "scores_prompt", False))
        top = max(logprobs or 0, getattr(body, "prompt_logprobs", None) or 0)
        params = SamplingParams(
            temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, min_p=body.min_p,
            repetition_penalty=body.repetition_penalty, presence_penalty=body.presence_penalty,
            frequency_penalty=body.frequency_penalty, seed=body.seed, max_tokens=1 if echo_only else max_tokens,
            n=body.n, stop=list(body.stop or []), stop_token_ids=body.stop_token_ids, ignore_eos=body.ignore_eos,
            skip_special_tokens=body.skip_special_tokens, logprobs=top, prompt_logprobs=scores_prompt,
            structured=structured)
        route = self.router.route(
            requested, temperature=body.temperature, prompt_tokens=max(len(p) for p in prompts),
            inflight=self.variants.inflight, latency_budget_ms=_hint(request, body, "latency_budget_ms"),
            task_type=_hint(request, body, "task_type"), user_key=body.user or key)
        record.variant, record.route_reason = route.variant, route.reason
        self.metrics.routes.labels(variant=route.variant, reason=route.reason).inc()
        job = Job(kind, rid, body.model, prompts, params, record, tok, tools, logprobs, body.return_token_ids,
                  content, echo=bool(getattr(body, "echo", False)), echo_only=echo_only,
                  prompt_logprobs=getattr(body, "prompt_logprobs", None))
        try:
            run = await self.variants.submit(prompts, params, rid, route.variant)
        except RequestError as exc:
            message, param = str(exc), _param_of(str(exc), field)
            if "sampling_params.structured" in message:  # name the request's own field, not the engine's
                message = f"{structured_field}: {message.split(': ', 2)[-1]}"
                param = structured_field
            raise self._reject(record, 400, message, param) from None
        return job, run

    def _reject(self, record: UsageRecord, status: int, message: str, param: str | None) -> ApiError:
        record.status, record.http_status, record.error = "rejected", status, message
        self.usage.finish(record)
        return ApiError(status, message, param=param)


def create_app(cfg: ServeConfig, variants: Variants | None = None) -> FastAPI:
    """The app for `cfg`; loads the model unless `variants` (an already built engine) is given."""
    variants = variants or Variants.load(cfg.model, cfg.engine, resolve_device(cfg.runtime.device))
    server = Server(cfg, variants)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        # uvicorn has already let in-flight requests finish (its graceful timeout); cancel what remains.
        server.draining = True
        deadline = time.monotonic() + cfg.queue.shutdown_grace_s
        while variants.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(variants.abort_all)
        variants.close()

    app = FastAPI(title="temper serve", lifespan=lifespan)
    app.state.server = server

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.param, exc.kind, exc.code), exc.status, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = describe_validation(list(exc.errors()))
        if request.url.path in ENDPOINTS:  # a refused generation request is a usage record too
            api_key = request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None
            server.usage.finish(UsageRecord(f"rejected-{uuid.uuid4().hex[:24]}", ENDPOINTS[request.url.path], "",
                                            "none", "none", key_id(api_key), status="rejected", http_status=400,
                                            error=message))
        return JSONResponse(error_body(message, param), 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and methods answer in the OpenAI error shape, not FastAPI's {"detail": ...}."""
        what = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
        return JSONResponse(error_body(f"{request.method} {request.url.path}: {what}", None, "invalid_request_error",
                                       {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)),
                            exc.status_code, getattr(exc, "headers", None))

    @app.middleware("http")
    async def _count(request: Request, call_next: Any) -> Response:
        """temper_serve_http_requests_total by route, method and status: refusals and failures included."""
        try:
            response = await call_next(request)
        except Exception:
            server.metrics.http.labels(route=_route(request), method=request.method, status="500").inc()
            raise
        server.metrics.http.labels(route=_route(request), method=request.method,
                                   status=str(response.status_code)).inc()
        return response

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", request.url.path)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", None, "server_error"), 500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "draining" if server.draining else "ok", "model": server.name,
                "policy_version": variants.version, "inflight": variants.inflight}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        names = [server.name, f"{server.name}:fast", f"{server.name}:auto"]
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "temper",
                                            "max_model_len": variants.max_model_len} for n in names]}

    @app.get("/metrics")
    async def metrics() -> Response:
        server.metrics.inflight.set(variants.inflight)
        return Response(server.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/completions")
    async def completions(request: Request, body: CompletionRequest) -> Response:
        return await server.generate(request, body, "completion")

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: ChatRequest) -> Response:
        return await server.generate(request, body, "chat")

    add_tokenizer_routes(app, server.name, variants.tokenizer, variants.max_model_len)
    add_rl_routes(app, server)
    add_responses_routes(app, server)
    add_messages_routes(app, server)

    @app.post("/v1/load_weights")
    async def load_weights(body: LoadWeightsRequest) -> dict[str, Any]:
        if not cfg.allow_load_weights:
            raise ApiError(403, "load_weights is disabled (allow_load_weights: false)", code="forbidden")
        start = time.perf_counter()
        try:
            n = await variants.load_weights_from(body.path, body.version)
        except TemperError as exc:
            raise ApiError(400, f"path: {exc}", param="path") from None
        log.info("loaded %d tensors from %s as version %d", n, body.path, body.version)
        return {"version": body.version, "tensors": n, "seconds": round(time.perf_counter() - start, 3)}

    return app


ENDPOINTS = {"/v1/completions": "completion", "/v1/chat/completions": "chat"}  # path -> usage endpoint


def _route(request: Request) -> str:
    """The matched route's template (bounded label values), or 'unmatched'."""
    route = request.scope.get("route")
    return getattr(route, "path", None) or "unmatched"


def _hint(request: Request, body: Sampling, name: str) -> Any:
    """A routing hint from the body or its header (X-Latency-Budget-Ms, X-Task-Type)."""
    value = getattr(body, name)
    if value is not None:
        return value
    header = request.headers.get({"latency_budget_ms": "x-latency-budget-ms", "task_type": "x-task-type"}[name])
    if header is None:
        return None
    try:
        return float(header) if name == "latency_budget_ms" else header
    except ValueError:
        raise ApiError(400, f"X-Latency-Budget-Ms: not a number ({header!r})", param="latency_budget_ms") from None


def _param_of(message: str, default: str) -> str:
    """The field an engine RequestError names ('sampling_params.top_k=...' -> 'top_k')."""
    if "sampling_params." in message:
        return message.split("sampling_params.", 1)[1].split("=", 1)[0].split(" ", 1)[0]
    return default


def _seconds_to_utc_midnight() -> int:
    now = time.time()
    return int(86400 - now % 86400) + 1
