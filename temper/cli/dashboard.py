"""`temper dashboard`: a local web page over run, eval and envqa folders (see docs/dashboard.md)."""

from pathlib import Path
from typing import Annotated

import typer

from temper.errors import TemperError


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard(
        folders: Annotated[list[Path] | None, typer.Argument(help="Folders to look in (default: runs/); each may "
                                                             "hold run, eval and envqa folders or be one.",
                                                             show_default=False)] = None,
        host: Annotated[str, typer.Option("--host", help="Address to bind; anything but 127.0.0.1 exposes your "
                                          "runs to the network.")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Port (0 = any free port).")] = 8050,
    ) -> None:
        """Browse runs (live charts, trajectories token by token), evaluations and envqa reports; read-only."""
        import uvicorn

        from temper.dashboard.app import create_app
        from temper.net import free_port

        roots = folders or [Path("runs")]
        missing = [str(p) for p in roots if not p.is_dir()]
        if folders and missing:  # the default runs/ may not exist yet: the page says so
            raise TemperError(f"temper dashboard: no such folder: {', '.join(missing)}")
        bind_port = port or free_port(host)
        # One line on stdout that scripts (and the docs test) can wait for.
        typer.echo(f"temper dashboard on http://{host}:{bind_port}/ over {', '.join(map(str, roots))}")
        uvicorn.run(create_app(roots), host=host, port=bind_port, log_level="warning")
