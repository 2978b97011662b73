"""`temper serve`: the engine behind an OpenAI-compatible HTTP API.

    app = create_app(ServeConfig.from_recipe({"model": "smollm2-135m"}))   # FastAPI; run it with uvicorn

Each model is served as `M` (standard), `M:fast` (n-gram speculative decoding, greedy-identical)
and `M:auto` (routed per request). See docs/serve.md.
"""

from typing import Any

__all__ = ["ServeConfig"]


def __getattr__(name: str) -> Any:
    # Lazy: the route layer (layer, routes, runs, responses, streaming, schemas, chat, constraints) must
    # import without the engine: the external-agent endpoint (temper.external) is that layer too.
    if name == "ServeConfig":
        from temper.serve.config import ServeConfig

        return ServeConfig
    raise AttributeError(name)
