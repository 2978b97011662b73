"""`Prices`: what tokens cost, in USD per million; one type for serve's usage records and eval's cost columns."""

from pydantic import Field

from temper.config import ConfigModel


class Prices(ConfigModel):
    """USD per million tokens (defaults: a small hosted model)."""

    input: float = Field(0.10, ge=0)
    cached_input: float = Field(0.025, ge=0)  # prompt tokens served from a prefix cache
    output: float = Field(0.40, ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """USD for one call: `cached_tokens` of its `prompt_tokens` at the cached price."""
        fresh = prompt_tokens - cached_tokens
        return (fresh * self.input + cached_tokens * self.cached_input + completion_tokens * self.output) / 1e6
