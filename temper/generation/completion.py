"""What a generation client returns: a finished `Completion`, and `TokenEvent`s while streaming."""

from dataclasses import dataclass, field


@dataclass
class Completion:
    """One sample. `logprobs[i]` is log p(token_ids[i]) under softmax(logits / temperature),
    before penalties and top-k/top-p/min-p truncation (temperature 0: plain softmax); this is
    the quantity the trainer recomputes. `versions[i]` is the policy version that sampled it."""

    request_id: str
    index: int  # sample index within the request (0..n-1)
    prompt_token_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[int, float]] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish_reason: str | None = None  # stop | length | abort | error
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    error: str | None = None
    num_cached_prompt_tokens: int = 0
    prompt_logprobs: list[float | None] | None = None  # with SamplingParams.prompt_logprobs
    prompt_top_logprobs: list[dict[int, float] | None] | None = None

    @property
    def version(self) -> int | None:
        """The policy version of the last token (a partial rollout may span several)."""
        return self.versions[-1] if self.versions else None


@dataclass
class TokenEvent:
    """One new token of one sample, as streamed to callbacks and async iterators."""

    request_id: str
    index: int
    token_id: int
    logprob: float
    version: int
    top_logprobs: dict[int, float] | None = None
