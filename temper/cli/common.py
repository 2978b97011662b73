"""Options shared by every command that takes configuration, so they behave the same everywhere."""

from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import yaml

from temper.config import ConfigModel, load_config

C = TypeVar("C", bound=ConfigModel)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML configuration file (merged over the command's recipe).",
                 show_default=False),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a field: dotted.key=value (repeatable).", show_default=False),
]
PrintConfigOption = Annotated[
    bool,
    typer.Option("--print-config", help="Print the fully resolved configuration as YAML and exit."),
]


def resolve_config(cls: type[C], config: Path | None, sets: list[str] | None,
                   flags: dict[str, Any] | None = None) -> C:
    """The command's recipe, then the config file, then `--set` overrides, then explicit command-line flags
    (dotted keys; None: not given). Flag values are taken as they are, never parsed as YAML: a prompt such as
    "yes" or a suite spec stays a string."""
    return load_config(cls, config, sets or [], flags)


def print_config(cfg: ConfigModel) -> None:
    """`--print-config`: the resolved configuration as YAML on stdout, then exit 0."""
    typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), nl=False)
    raise typer.Exit(0)
