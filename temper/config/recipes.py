"""Recipes: each command's defaults that differ from its section classes, kept as YAML data in
`temper/config/recipes/<name>.yaml` and deep-merged under the user's `--config` file and `--set`s.

Section classes carry only their own defaults; a command's config class names its recipe
(`ConfigModel.recipe`). Because the recipe is data merged before validation, giving one field of a
section never resets the section's other recipe values (a pydantic default_factory would).
"""

from functools import cache
from importlib import resources
from typing import Any

import yaml


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`: mappings merge key by key, anything else (lists included) replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@cache
def _recipe_text(name: str) -> str:
    return resources.files("temper.config").joinpath("recipes", f"{name}.yaml").read_text()


def read_recipe(name: str | None) -> dict[str, Any]:
    """The recipe `name` as a fresh dict ({} for None)."""
    if name is None:
        return {}
    data = yaml.safe_load(_recipe_text(name)) or {}
    if not isinstance(data, dict):
        raise ValueError(f"temper/config/recipes/{name}.yaml: the top level must be a mapping")
    return data
