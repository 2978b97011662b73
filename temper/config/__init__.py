"""Typed configuration: pydantic models loaded from YAML with dotted `--set` overrides."""

from temper.config.base import ConfigModel
from temper.config.loader import apply_overrides, load_config, parse_override

__all__ = ["ConfigModel", "apply_overrides", "load_config", "parse_override"]
