"""`temper serve`: the engine behind an OpenAI-compatible HTTP API.

    app = create_app(ServeConfig(model="smollm2-135m"))   # FastAPI; run it with uvicorn

Each model is served as `M` (standard), `M:fast` (n-gram speculative decoding, greedy-identical)
and `M:auto` (routed per request). See docs/serve.md.
"""

from temper.serve.config import ServeConfig

__all__ = ["ServeConfig"]
