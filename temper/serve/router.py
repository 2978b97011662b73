"""Which variant serves a request: `M` and `M:fast` as named, `M:auto` by policy.

The policy for `M:auto`, first rule that applies wins:
  1. sampled requests (temperature > 0) -> standard: the engine speculates only greedy decoding;
  2. a task-type hint in the fast or standard list -> that variant;
  3. a latency budget below `fast_below_latency_ms` -> fast;
  4. load: more requests in flight than `max_load_for_fast` -> standard (drafts cost batch compute);
  5. the A/B split, sticky per user key (a hash, so the same key always lands on the same arm);
  6. prompt length: at least `min_prompt_tokens_fast` tokens -> fast (long inputs are what drafts copy);
  7. the default.
"""

import hashlib
from dataclasses import dataclass

from temper.serve.config import RoutingConfig


@dataclass
class Route:
    variant: str  # standard | fast
    reason: str  # a short tag, recorded and returned in the X-Route-Reason header


class UnknownModel(ValueError):
    pass


def split_model(name: str, served: str) -> str:
    """'M' -> 'standard', 'M:fast' -> 'fast', 'M:auto' -> 'auto'; anything else raises UnknownModel."""
    base, _, suffix = name.partition(":")
    if base != served or suffix not in ("", "fast", "auto", "standard"):
        raise UnknownModel(f"model {name!r} is not served here; available: {served}, {served}:fast, {served}:auto")
    return suffix or "standard"


def ab_arm(key: str, fraction_fast: float, salt: str) -> str:
    digest = hashlib.sha256(f"{salt}:{key}".encode()).digest()
    share = int.from_bytes(digest[:8], "big") / 2**64
    return "fast" if share < fraction_fast else "standard"


class Router:
    def __init__(self, cfg: RoutingConfig):
        self.cfg = cfg

    def route(self, requested: str, *, temperature: float, prompt_tokens: int, inflight: int,
              latency_budget_ms: float | None = None, task_type: str | None = None,
              user_key: str | None = None) -> Route:
        if requested in ("standard", "fast"):
            return Route(requested, "explicit")
        c = self.cfg
        if temperature > 0:
            return Route("standard", "sampled")
        if task_type:
            if task_type in c.fast_task_types:
                return Route("fast", f"task:{task_type}")
            if task_type in c.standard_task_types:
                return Route("standard", f"task:{task_type}")
        if latency_budget_ms is not None and latency_budget_ms < c.fast_below_latency_ms:
            return Route("fast", "latency_budget")
        if inflight > c.max_load_for_fast:
            return Route("standard", "load")
        if c.ab.enabled and user_key:
            return Route(ab_arm(user_key, c.ab.fast_fraction, c.ab.salt), "ab")
        if prompt_tokens >= c.min_prompt_tokens_fast:
            return Route("fast", "prompt_length")
        return Route(c.default, "default")
