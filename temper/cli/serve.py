"""`temper serve`: the engine behind an OpenAI-compatible HTTP API (see docs/serve.md)."""

import logging
from typing import Annotated

import typer

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config, resolve_config
from temper.net import free_port

log = logging.getLogger("temper.serve")


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        config: ConfigOption = None,
        sets: SetOption = None,
        model: Annotated[str | None, typer.Option("--model", "-m", help="Bundled name, folder, GGUF file or Hub id.",
                                                  show_default=False)] = None,
        host: Annotated[str | None, typer.Option("--host", help="Address to bind (default 127.0.0.1).",
                                                 show_default=False)] = None,
        port: Annotated[int | None, typer.Option("--port", help="Port (default 8000; 0 = any free port).",
                                                 show_default=False)] = None,
        device: Annotated[str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N (runtime.device).",
                                                   show_default=False)] = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Serve a model as M, M:fast and M:auto over an OpenAI-compatible API (/v1/chat/completions,
        /v1/completions, /v1/models, /v1/load_weights, /health, /metrics)."""
        import uvicorn

        from temper.runtime import apply_runtime
        from temper.serve.app import create_app, served_name
        from temper.serve.config import ServeConfig

        cfg = resolve_config(ServeConfig, config, sets, {"model": model, "host": host, "port": port,
                                                         "runtime.device": device})
        if show:
            print_config(cfg)
        apply_runtime(cfg.runtime)
        app_ = create_app(cfg)
        bind_port = cfg.port or free_port(cfg.host)
        name = served_name(cfg)
        # One line on stdout that scripts (and the docs test) can wait for.
        typer.echo(f"serving {name} ({name}, {name}:fast, {name}:auto) on http://{cfg.host}:{bind_port}/v1",
                   err=False)
        uvicorn.run(app_, host=cfg.host, port=bind_port, log_level="warning",
                    timeout_graceful_shutdown=int(cfg.queue.shutdown_grace_s) or None)
