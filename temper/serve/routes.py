"""The routes of the OpenAI-compatible layer on a FastAPI app: /v1/models, /v1/chat/completions,
/v1/completions, the Responses API, and every error in OpenAI's shape (a refusal, a body that fails
validation, an unknown route or method, a bug)."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from temper.serve.layer import ApiError, OpenAILayer, error_response
from temper.serve.responses_api import add_responses_routes
from temper.serve.schemas import ChatRequest, CompletionRequest, describe_validation, error_body

log = logging.getLogger("temper.serve")


def add_openai_routes(app: FastAPI, layer: OpenAILayer) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = describe_validation(list(exc.errors()))
        layer.invalid(request, message)
        return JSONResponse(error_body(message, param), 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and methods answer in the OpenAI error shape, not FastAPI's {"detail": ...}."""
        what = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
        return JSONResponse(error_body(f"{request.method} {request.url.path}: {what}", None, "invalid_request_error",
                                       {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)),
                            exc.status_code, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", request.url.path)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", None, "server_error"), 500)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        extra = {"max_model_len": layer.max_model_len} if layer.max_model_len is not None else {}
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "temper", **extra}
                                           for n in layer.model_names]}

    @app.post("/v1/completions")
    async def completions(request: Request, body: CompletionRequest) -> Response:
        return await layer.generate(request, body, "completion")

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: ChatRequest) -> Response:
        return await layer.generate(request, body, "chat")

    add_responses_routes(app, layer)
