"""The base class of every configuration section."""

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    """Strict by default: an unknown key is an error, not a silently ignored typo."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())
