"""The FastAPI app: OpenAI-compatible routes in front of the shared engine.

    app = create_app(ServeConfig.from_recipe({"model": "smollm2-135m"}))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Admission is bounded (`queue.max_requests` requests and `queue.max_sequences` sequences, prompts x n,
in flight; beyond them 429 + Retry-After; one request over `queue.max_sequences_per_request` is a
400), a bad request is a 400 naming its field, and a request that fails in the engine fails alone
(500 for it, the others keep running). Every request, refused ones included, leaves a usage
record. A request's constraint compiles off the engine's thread, under `grammar`'s limits. The
operator's routes (weights, versions, pause, bulk abort) need its token (temper/serve/admin.py).
"""

import asyncio
import logging
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from temper.errors import TemperError
from temper.generation import RequestError, StructuredOutputs, default_served_name
from temper.runtime import resolve_device
from temper.serve.admin import Admin
from temper.serve.config import ServeConfig
from temper.serve.constraints import ConstraintError, check_limits
from temper.serve.layer import ApiError, OpenAILayer, request_error
from temper.serve.messages_api import add_messages_routes
from temper.serve.metrics import Metrics
from temper.serve.responses import Job
from temper.serve.rl_routes import add_rl_routes
from temper.serve.router import Router, UnknownModel, split_model
from temper.serve.routes import add_openai_routes
from temper.serve.runs import Run
from temper.serve.schemas import LoadWeightsRequest, Sampling
from temper.serve.tokenize_routes import add_tokenizer_routes
from temper.serve.usage import UsageLog, UsageRecord, key_id
from temper.serve.variants import Variants

log = logging.getLogger("temper.serve")
ENDPOINTS = {"/v1/completions": "completion", "/v1/chat/completions": "chat"}  # path -> usage endpoint


def served_name(cfg: ServeConfig) -> str:
    return cfg.served_name or default_served_name(cfg.model)


class Server(OpenAILayer):
    """The route layer over the engine's variants: admission, routing, usage records and metrics."""

    def __init__(self, cfg: ServeConfig, variants: Variants):
        self.name = served_name(cfg)
        super().__init__(None, variants.tokenizer, [self.name, f"{self.name}:fast", f"{self.name}:auto"],
                         cfg.max_tokens_default, variants.max_model_len)
        self.cfg, self.variants = cfg, variants
        self.router = Router(cfg.routing)
        self.metrics = Metrics(variants)
        self.usage = UsageLog(cfg.usage, self.metrics)
        self.reserving = 0  # requests between admission and the engine (their prompts being prepared)
        self.draining = False
        self.open = asyncio.Event()  # cleared while paused (/pause): new requests wait for /resume
        self.open.set()
        self.admin = Admin(cfg)
        self.lapse: asyncio.Task | None = None  # resumes a pause after cfg.max_pause_s

    def resume(self) -> None:
        self.variants.aengine.resume()
        self.open.set()
        if self.lapse is not None and self.lapse is not asyncio.current_task():
            self.lapse.cancel()
        self.lapse = None

    def paused(self) -> None:
        """A /pause began: it lapses after `max_pause_s` unless /resume comes first."""
        if self.lapse is not None:
            self.lapse.cancel()

        async def lapse() -> None:
            await asyncio.sleep(self.cfg.max_pause_s)
            log.warning("the pause lapsed after %.0f s (max_pause_s) without /resume: resuming", self.cfg.max_pause_s)
            self.resume()

        self.lapse = asyncio.create_task(lapse())

    async def compile_constraint(self, so: StructuredOutputs | None, field: str) -> None:
        """Bound the constraint's size and nesting, then compile it off the engine's thread (under
        `grammar.compile_timeout_s`); ApiError 400 naming `field`."""
        if so is None:
            return
        limits = self.cfg.grammar
        try:
            check_limits(so, field, limits.max_bytes, limits.max_depth)
            await self.variants.compile(so, limits.compile_timeout_s)
        except ConstraintError as exc:
            raise ApiError(400, str(exc), field) from None
        except RequestError as exc:
            raise ApiError(400, f"{field}: {str(exc).split(': ', 2)[-1]}", field) from None

    def check_sequences(self, sequences: int, param: str) -> None:
        """Prompts x n of one request: 400 over `queue.max_sequences_per_request`, 429 when the engine
        holds `queue.max_sequences` already."""
        q = self.cfg.queue
        if sequences > q.max_sequences_per_request:
            raise ApiError(400, f"{param}: {sequences} sequences (prompts x n) in one request, over this server's "
                           f"limit of {q.max_sequences_per_request} (queue.max_sequences_per_request)", param)
        if self.variants.sequences + sequences > q.max_sequences:
            self.metrics.rejected.labels(reason="queue_full").inc()
            raise ApiError(429, f"server busy: {self.variants.sequences} sequences in flight, {sequences} more "
                           f"would pass queue.max_sequences={q.max_sequences}; retry later", code="queue_full",
                           kind="rate_limit_error", headers={"Retry-After": str(q.retry_after_s)})

    def check_admission(self, key: str) -> None:
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

    # ---- the layer's hooks ----------------------------------------------------------------------
    async def admit(self, request: Request, body: Sampling, job: Job) -> None:
        """Waits while the server is paused; a 404 for another model; the budget and queue checks."""
        await self.open.wait()
        try:
            job.variant = split_model(body.model, self.name)
        except UnknownModel as exc:
            raise ApiError(404, str(exc), param="model", code="model_not_found") from None
        job.record = UsageRecord(job.rid, job.kind, body.model, "standard", "none", _key(request))
        try:
            self.check_admission(job.record.key)
        except ApiError as exc:
            self.refused(job, exc)
            raise

    async def start(self, request: Request, body: Sampling, job: Job) -> Run:
        self.reserving += 1
        try:
            return await super().start(request, body, job)
        finally:
            self.reserving -= 1

    async def submit(self, request: Request, body: Sampling, job: Job) -> Run:
        """Routes the request to a variant, then queues it in the engine."""
        route = self.router.route(
            job.variant, temperature=body.temperature, prompt_tokens=max(len(p) for p in job.prompts),
            inflight=self.variants.inflight, latency_budget_ms=_hint(request, body, "latency_budget_ms"),
            task_type=_hint(request, body, "task_type"), user_key=body.user or job.record.key)
        job.variant = job.record.variant = route.variant
        job.record.route_reason = route.reason
        self.metrics.routes.labels(variant=route.variant, reason=route.reason).inc()
        job.headers = {"X-Variant": route.variant, "X-Route-Reason": route.reason, "X-Request-Id": job.rid}
        with self.variants.engine.grammars.pinned(job.params.structured):  # compiled here, found by the engine
            await self.compile_constraint(job.params.structured, job.structured_field or "structured_outputs")
            self.check_sequences(len(job.prompts) * job.params.n, "n")
            try:
                return await self.variants.submit(job.prompts, job.params, job.rid, route.variant, job.record.key)
            except RequestError as exc:
                raise request_error(exc, job, "messages" if job.kind == "chat" else "prompt") from None

    def finish(self, job: Job, status: str, http_status: int = 200, error: str | None = None) -> None:
        r = job.record
        r.prompt_tokens, r.cached_prompt_tokens, r.completion_tokens = job.counts()
        r.status, r.http_status, r.error, r.ttft_s = status, http_status, error, job.ttft_s
        r.latency_s = time.perf_counter() - job.start
        r.policy_version = job.version
        r.finish_reasons = [job.done[i].finish_reason or "" for i in sorted(job.done)]
        self.usage.finish(r, job.content, [job.done[i].text for i in sorted(job.done)])

    def refused(self, job: Job, exc: ApiError) -> None:
        r = job.record
        r.status, r.http_status, r.error = "rejected", exc.status, exc.message
        self.usage.finish(r)

    def invalid(self, request: Request, message: str) -> None:
        if request.url.path in ENDPOINTS:  # a refused generation request is a usage record too
            self.usage.finish(UsageRecord(f"rejected-{uuid.uuid4().hex[:24]}", ENDPOINTS[request.url.path], "",
                                          "none", "none", _key(request), status="rejected", http_status=400,
                                          error=message))


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
    add_openai_routes(app, server)

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

    @app.get("/health")
    async def health() -> dict[str, Any]:
        status = "draining" if server.draining else "paused" if variants.aengine.paused else "ok"
        return {"status": status, "model": server.name, "policy_version": variants.version,
                "inflight": variants.inflight, "sequences": variants.sequences}

    @app.get("/metrics")
    async def metrics() -> Response:
        server.metrics.inflight.set(variants.inflight)
        return Response(server.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    add_tokenizer_routes(app, server.name, variants.tokenizer, variants.max_model_len)
    add_rl_routes(app, server)
    add_messages_routes(app, server)

    @app.post("/v1/load_weights")
    async def load_weights(request: Request, body: LoadWeightsRequest) -> dict[str, Any]:
        server.admin.require(request)
        path = server.admin.weights_path(body.path, "path")
        start = time.perf_counter()
        try:
            n = await variants.load_weights_from(path, body.version)
        except TemperError as exc:
            param = "version" if str(exc).startswith("version:") else "path"
            raise ApiError(400, str(exc) if str(exc).startswith(f"{param}:") else f"{param}: {exc}", param) from None
        log.info("loaded %d tensors from %s as version %d", n, body.path, body.version)
        return {"version": body.version, "tensors": n, "seconds": round(time.perf_counter() - start, 3)}

    return app


def _key(request: Request) -> str:
    return key_id(request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None)


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


def _seconds_to_utc_midnight() -> int:
    now = time.time()
    return int(86400 - now % 86400) + 1


def _route(request: Request) -> str:
    """The matched route's template (bounded label values), or 'unmatched'."""
    route = request.scope.get("route")
    return getattr(route, "path", None) or "unmatched"
