"""Options shared by every command that takes configuration, so they behave the same everywhere."""

from pathlib import Path
from typing import Annotated, TypeVar

import typer

from temper.config import ConfigModel, load_config

C = TypeVar("C", bound=ConfigModel)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML configuration file.", show_default=False),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a field: dotted.key=value (repeatable).", show_default=False),
]


def resolve_config(cls: type[C], config: Path | None, sets: list[str] | None, flags: list[str] = ()) -> C:
    """Config file, then `--set` overrides, then explicit command-line flags (as dotted overrides)."""
    return load_config(cls, config, [*(sets or []), *flags])


def flag(key: str, value: object) -> list[str]:
    """An explicit flag as a dotted override, or nothing when the flag was not given."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [f"{key}={'true' if value else 'false'}"]
    return [f"{key}={value}"]
