"""vLLM's RL routes on temper serve, so trainers written for vLLM can drive it (vLLM's shapes):

- `POST /inference/v1/generate`: token ids in; sampled ids, logprobs and weight-version spans out;
- `POST /pause?mode=abort|wait|keep`, `POST /resume`, `GET /is_paused`: while paused no request is
  stepped and new ones wait; `keep` holds the running ones in place (they resume under whatever
  weights are loaded meanwhile), `wait` lets them finish first, `abort` ends them; a pause lapses
  after `max_pause_s`;
- `POST /abort_requests {"request_ids": [...]}` (none: every request): a user's own requests (user:
  API key), anyone's with the operator's token;
- `POST /update_weights {"update_info": {"path": safetensors folder, "version": N}}`, with
  `/start_weight_update`, `/finish_weight_update {"weight_version"}`, `/update_weight_version
  {"new_version"}` and `GET /weight_info`; temper's versions are integers and only move forward.

Pause, resume and the weight routes need the operator's token (temper/serve/admin.py).
"""

import asyncio
import time
import uuid
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from temper.errors import TemperError
from temper.generation import Completion, RequestError, SamplingParams, StructuredOutputs
from temper.serve.schemas import Lenient, error_body
from temper.serve.usage import key_id


class GenerateSampling(Lenient):
    """vLLM's SamplingParams fields that temper's engine has (its defaults: max_tokens 16)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 16
    n: int = 1
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    logprobs: int | None = None  # None: no logprobs; 0: the sampled token's; k: and the top k
    skip_special_tokens: bool = True
    structured_outputs: dict[str, Any] | None = None  # json, json_object, regex, choice, grammar, structural_tag

    def params(self) -> SamplingParams:
        """RequestError (naming the field) for a bad constraint."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, top_k=max(0, self.top_k), min_p=self.min_p,
            repetition_penalty=self.repetition_penalty, presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty, seed=self.seed, max_tokens=self.max_tokens, n=self.n,
            stop=stop, stop_token_ids=list(self.stop_token_ids or []), ignore_eos=self.ignore_eos,
            logprobs=self.logprobs or 0, skip_special_tokens=self.skip_special_tokens,
            structured=StructuredOutputs.from_dict(self.structured_outputs, "sampling_params.structured_outputs")
            if self.structured_outputs is not None else None)


class GenerateRequest(Lenient):
    token_ids: list[int] = Field(min_length=1)
    sampling_params: GenerateSampling = Field(default_factory=GenerateSampling)
    model: str | None = None
    request_id: str | None = None
    stream: bool = False


class AbortRequest(Lenient):
    request_ids: list[str] | None = None


class UpdateWeightsRequest(Lenient):
    update_info: dict[str, Any]
    weight_version: str | None = None


def version_spans(versions: list[int]) -> list[dict[str, Any]]:
    """[1, 1, 2] -> [{"version": "1", "start": 0, "end": 2}, {"version": "2", "start": 2, "end": 3}]"""
    spans: list[dict[str, Any]] = []
    for i, v in enumerate(versions):
        if spans and spans[-1]["version"] == str(v):
            spans[-1]["end"] = i + 1
        else:
            spans.append({"version": str(v), "start": i, "end": i + 1})
    return spans


def _choice(c: Completion, logprobs: int | None) -> dict[str, Any]:
    content = None
    if logprobs is not None:
        content = [{"token_id": t, "logprob": lp,
                    "top_logprobs": [{"token_id": k, "logprob": v} for k, v in (top or {}).items()]}
                   for t, lp, top in zip(c.token_ids, c.logprobs, c.top_logprobs or [None] * len(c.token_ids),
                                         strict=False)]
    return {"index": c.index, "finish_reason": c.finish_reason, "stop_reason": c.stop_reason,
            "token_ids": c.token_ids, "logprobs": {"content": content} if content is not None else None,
            "weight_versions": version_spans(c.versions)}


def user_key(request: Request) -> str:
    """The caller's key: its API key's id, or 'anonymous'."""
    return key_id(request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None)


def add_rl_routes(app: FastAPI, server: Any) -> None:
    variants = server.variants

    def refuse(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
        return JSONResponse(error_body(message, param, code=code), status)

    @app.post("/inference/v1/generate")
    async def generate(request: Request, body: GenerateRequest) -> Any:
        if body.stream:
            return refuse(400, "stream: streaming is not supported on /inference/v1/generate; use "
                               "/v1/completions with stream and return_token_ids", "stream")
        if body.model is not None and body.model.partition(":")[0] != server.name:
            return refuse(404, f"model {body.model!r} is not served here; available: {server.name}", "model",
                          "model_not_found")
        try:
            params = body.sampling_params.params()
        except RequestError as exc:
            return refuse(400, str(exc), "sampling_params.structured_outputs")
        await server.open.wait()  # paused: new requests wait for /resume
        rid = body.request_id or f"generate-tokens-{uuid.uuid4().hex[:16]}"
        if rid in variants.owners:
            return refuse(400, f"request_id: {rid!r} is in flight already", "request_id")
        key = user_key(request)
        server.check_admission(key)  # a 429 (with Retry-After) or 503, through the ApiError handler
        with variants.engine.grammars.pinned(params.structured):  # compiled here, found by the engine
            await server.compile_constraint(params.structured, "sampling_params.structured_outputs")
            server.check_sequences(params.n, "sampling_params.n")
            try:
                run = await variants.submit([body.token_ids], params, rid, "standard", key)
            except RequestError as exc:
                return refuse(400, str(exc), "sampling_params")
        done: list[Completion] = []
        try:
            async for _, item in run:
                if isinstance(item, Completion):
                    done.append(item)
        finally:
            run.close()
        if err := next((c.error for c in done if c.finish_reason == "error"), None):
            return JSONResponse(error_body(err, None, "server_error"), 500)
        done.sort(key=lambda c: c.index)
        out = sum(len(c.token_ids) for c in done)
        return {"request_id": rid, "model": server.name, "created": int(time.time()), "output_mode": "tokens",
                "choices": [_choice(c, body.sampling_params.logprobs) for c in done],
                "usage": {"prompt_tokens": len(body.token_ids), "completion_tokens": out,
                          "total_tokens": len(body.token_ids) + out}}

    @app.post("/pause")
    async def pause(request: Request, mode: str = Query("abort"), clear_cache: bool = Query(True)) -> Any:
        server.admin.require(request)
        if mode not in ("abort", "wait", "keep"):
            return refuse(400, f"mode={mode!r}: must be abort, wait or keep", "mode")
        server.open.clear()  # new requests wait from here on
        server.paused()  # and lapses after max_pause_s
        if mode == "abort":
            await asyncio.to_thread(variants.abort_all)
        elif mode == "wait":
            while variants.inflight:
                await asyncio.sleep(0.01)
        await variants.aengine.pause()
        return {"status": "paused"}

    @app.post("/resume")
    async def resume(request: Request) -> Any:
        server.admin.require(request)
        server.resume()
        return {"status": "resumed"}

    @app.get("/is_paused")
    async def is_paused() -> Any:
        return {"is_paused": variants.aengine.paused}

    @app.post("/abort_requests")
    async def abort_requests(request: Request, body: AbortRequest) -> Any:
        eng = variants.engine
        ids = body.request_ids or list(eng.requests)
        # an HTTP request of several prompts runs them as '<id>-<i>'
        targets = [r for r in list(eng.requests) if r in ids or r.rsplit("-", 1)[0] in ids]
        if not server.admin.is_admin(request):  # a user aborts only its own requests
            key = user_key(request)
            targets = [r for r in targets if variants.owner(r) == key]
        for rid in targets:
            await asyncio.to_thread(eng.abort, rid)
        return {"status": "aborted", "aborted": len(targets)}

    @app.post("/start_weight_update")
    async def start_weight_update(request: Request) -> Any:
        server.admin.require(request)
        return {"message": "Weight update started"}

    @app.post("/update_weights")
    async def update_weights(request: Request, body: UpdateWeightsRequest) -> Any:
        server.admin.require(request)
        path = body.update_info.get("path")
        if not isinstance(path, str) or not path:
            return refuse(400, 'update_info.path: a folder of safetensors is needed ({"update_info": {"path": '
                               '"/dir", "version": N}})', "update_info.path")
        path = server.admin.weights_path(path, "update_info.path")
        try:
            version = int(body.update_info.get("version", body.weight_version or variants.version + 1))
            n = await variants.load_weights_from(path, version)
        except (TemperError, ValueError) as exc:
            return refuse(400, f"update_info: {exc}", "update_info")
        return {"message": "Weights updated", "version": version, "tensors": n}

    @app.post("/finish_weight_update")
    async def finish_weight_update(request: Request, body: dict[str, Any] | None = None) -> Any:
        server.admin.require(request)
        if body and body.get("weight_version") is not None:
            return set_version(body["weight_version"], "weight_version")
        return {"message": "Weight update finished"}

    @app.post("/update_weight_version")
    async def update_weight_version(request: Request, body: dict[str, Any]) -> Any:
        server.admin.require(request)
        return set_version(body.get("new_version"), "new_version")

    def set_version(value: Any, param: str) -> Any:
        try:
            version = int(value)
        except (TypeError, ValueError):
            return refuse(400, f"{param}={value!r}: temper's policy versions are integers", param)
        try:
            variants.set_version(version)
        except TemperError as exc:
            return refuse(400, f"{param}: {str(exc).removeprefix('version: ')}", param)
        return {"success": True, "new_version": str(variants.version)}

    @app.get("/weight_info")
    async def weight_info() -> Any:
        return {"weight_version": str(variants.version)}
