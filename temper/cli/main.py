"""Entry point of the `temper` command. Each sub-command lives in a module of its own."""

import importlib
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from temper import __version__
from temper.errors import ConfigError, TemperError
from temper.logs import setup_logging

app = typer.Typer(
    name="temper",
    help="Post-train language-model agents with reinforcement learning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# Modules that register commands on `app` (each defines `register(app)`).
COMMAND_MODULES: list[str] = ["temper.cli.generate", "temper.cli.sft", "temper.cli.sandbox", "temper.cli.eval",
                              "temper.cli.compare", "temper.cli.train", "temper.cli.serve", "temper.cli.envqa",
                              "temper.cli.dashboard", "temper.cli.doctor", "temper.cli.image"]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"temper {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    log_format: Annotated[str, typer.Option("--log-format", help="Console log format: text or json.")] = "text",
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    if log_format not in ("text", "json"):
        raise typer.BadParameter("must be 'text' or 'json'", param_hint="--log-format")
    setup_logging(log_format, log_level)  # type: ignore[arg-type]


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        app()
    except ConfigError as exc:
        for line in exc.problems:
            err.print(Text.assemble(("config error: ", "red"), line))
        sys.exit(exc.exit_code)
    except TemperError as exc:
        err.print(Text.assemble(("error: ", "red"), str(exc)))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
