"""The base class of every configuration section."""

from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    """Strict by default: an unknown key is an error, not a silently ignored typo."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    # The command recipe (temper/config/recipes/<recipe>.yaml) merged under user data by `load_config`
    # and `from_recipe`; None: the class defaults alone.
    recipe: ClassVar[str | None] = None

    @classmethod
    def from_recipe(cls, data: dict[str, Any] | None = None) -> Self:
        """`data` deep-merged over the class's recipe, validated: what the command would run with."""
        from temper.config.recipes import deep_merge, read_recipe

        return cls.model_validate(deep_merge(read_recipe(cls.recipe), data or {}))
