"""Typed configuration: pydantic models loaded from a command's recipe, YAML and dotted `--set` overrides."""

from temper.config.base import ConfigModel
from temper.config.loader import apply_overrides, apply_values, load_config, parse_override
from temper.config.recipes import deep_merge, read_recipe

__all__ = ["ConfigModel", "apply_overrides", "apply_values", "deep_merge", "load_config", "parse_override",
           "read_recipe"]
