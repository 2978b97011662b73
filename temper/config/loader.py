"""Load a configuration: the command's recipe, then an optional YAML file, then `dotted.key=value`
overrides, then typed values (command-line flags), each deep-merged over the one before.

Every problem is reported before any work starts, one line each, naming the file (or
`--set`) and the dotted field, so that a user fixes all of them in one go.
"""

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from temper.config.base import ConfigModel
from temper.config.recipes import deep_merge, read_recipe
from temper.errors import ConfigError

C = TypeVar("C", bound=ConfigModel)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value); the value is parsed as YAML (`3` is an int)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError([f"--set {text!r}: expected dotted.key=value"])
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # a plain string that YAML cannot parse (e.g. "a: b: c") stays a string
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of `data` with each `dotted.key=value` set (the value parsed as YAML)."""
    result = _deep_copy(data)
    for text in overrides:
        path, value = parse_override(text)
        _set(result, path, value, f"--set {text!r}")
    return result


def apply_values(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of `data` with each dotted key set to its value as is (None: not given, skipped)."""
    result = _deep_copy(data)
    for key, value in values.items():
        if value is not None:
            _set(result, key.split("."), value, key)
    return result


def _set(data: dict[str, Any], path: list[str], value: Any, source: str) -> None:
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError([f"{source}: {'.'.join(path[: i + 1])} is a value, not a section"])
        node = child
    node[path[-1]] = value


def load_config(cls: type[C], path: str | Path | None = None, overrides: list[str] | None = None,
                values: dict[str, Any] | None = None) -> C:
    """Build `cls` from its recipe, YAML `path` (optional), `--set` overrides and typed `values` (dotted keys,
    e.g. command-line flags; None values skipped); raise ConfigError listing every problem."""
    source = str(path) if path is not None else "--set"
    data = read_recipe(cls.recipe)
    if path is not None:
        data = deep_merge(data, _read_yaml(Path(path)))
    if overrides:
        data = apply_overrides(data, overrides)
    if values:
        data = apply_values(data, values)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError([f"{path}: config file not found"])
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError([f"{path}{where}: {problem}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of sections, not {type(data).__name__}"])
    return data


def _describe(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        else:
            message = err["msg"]
            if "input" in err and err["type"] != "missing":
                message += f" (got {err['input']!r})"
        lines.append(f"{source}: {field}: {message}")
    return lines


def _deep_copy(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in data.items()}
