"""Per-request sampling settings, validated so that a bad field fails only its own request."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temper.errors import TemperError

if TYPE_CHECKING:
    from temper.generation.structured_outputs import StructuredOutputs


class RequestError(TemperError):
    """A request that cannot run (bad parameter, prompt too long); other requests keep running."""


@dataclass
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # HF style, over prompt and output tokens
    presence_penalty: float = 0.0  # OpenAI style, over output tokens
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 256
    n: int = 1
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int = 0  # top alternatives per token besides the sampled one (0 = only the sampled)
    skip_special_tokens: bool = True
    # Also score the prompt: log p(prompt[i] | prompt[:i]) under plain softmax (temperature 1),
    # e.g. reference-model logprobs. Such a request computes its whole prompt (no prefix cache).
    prompt_logprobs: bool = False
    # Keep the output inside a JSON schema, regex, choice or grammar (see structured_outputs.py).
    structured: "StructuredOutputs | None" = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self, where: str) -> None:
        """Raise RequestError naming `where` (the request) and the field at fault."""
        checks = [
            ("temperature", self.temperature >= 0, "must be >= 0"),
            ("top_p", 0 < self.top_p <= 1, "must be in (0, 1]"),
            ("top_k", self.top_k >= 0, "must be >= 0 (0 = off)"),
            ("min_p", 0 <= self.min_p < 1, "must be in [0, 1)"),
            ("repetition_penalty", self.repetition_penalty > 0, "must be > 0"),
            ("presence_penalty", -2 <= self.presence_penalty <= 2, "must be in [-2, 2]"),
            ("frequency_penalty", -2 <= self.frequency_penalty <= 2, "must be in [-2, 2]"),
            ("max_tokens", self.max_tokens >= 1, "must be >= 1"),
            ("n", self.n >= 1, "must be >= 1"),
            ("logprobs", 0 <= self.logprobs <= 20, "must be in [0, 20]"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise RequestError(f"{where}: sampling_params.{name}={getattr(self, name)!r} {why}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if any(not s for s in self.stop):
            raise RequestError(f"{where}: sampling_params.stop contains an empty string")
        if self.structured is not None:
            self.structured.validate(f"{where}: sampling_params.structured")
