"""A plain decoding loop: the correctness reference for the rollout engine.

One sequence, a contiguous per-layer KV cache, greedy or temperature/top-k/top-p sampling.
It is written to be read, not to be fast; the engine must agree with it.
"""

from collections.abc import Callable, Iterable

import torch

from temper.models.attention import causal_mask, sdpa
from temper.models.llama import LlamaForCausalLM


class ContiguousKVCache:
    """An attention backend that appends each call's keys/values to a per-layer cache."""

    def __init__(self, sliding_window: int | None = None):
        self.sliding_window = sliding_window
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if layer in self.keys:
            k = torch.cat([self.keys[layer], k], dim=1)
            v = torch.cat([self.values[layer], v], dim=1)
        self.keys[layer], self.values[layer] = k, v
        t_q, t_k = q.shape[1], k.shape[1]
        if t_q == 1 and self.sliding_window is None:
            return sdpa(q, k, v, None, causal=False)  # one new query sees every cached key
        # New queries are the last t_q positions: sdpa's is_causal would align them to the first.
        return sdpa(q, k, v, causal_mask(t_q, t_k, q.device, self.sliding_window), causal=False)


def sample_next(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0,
                generator: torch.Generator | None = None) -> int:
    """One token id from a [vocab] logit vector; temperature 0 is greedy (argmax)."""
    if temperature <= 0:
        return int(logits.argmax())
    logits = logits.float() / temperature
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) > top_p  # keep the smallest set reaching top_p
        logits[order[drop]] = float("-inf")
    return int(torch.multinomial(logits.softmax(-1), 1, generator=generator))


@torch.no_grad()
def generate_reference(
    model: LlamaForCausalLM,
    input_ids: list[int],
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int | None = None,
    eos_ids: Iterable[int] | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
    on_token: Callable[[int], None] | None = None,
) -> list[int]:
    """The new token ids after `input_ids`; stops after the first id in `eos_ids` (which is included)."""
    if not input_ids:
        raise ValueError("generate_reference needs at least one input token")
    stop = set(eos_ids or ())
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    device = model.model.embed_tokens.weight.device
    cache = ContiguousKVCache(model.config.sliding_window)
    tokens = torch.tensor(input_ids, device=device)
    positions = torch.arange(len(input_ids), device=device)
    out: list[int] = []
    for _ in range(max_new_tokens):
        hidden = model(tokens, positions, cache)
        next_id = sample_next(model.compute_logits(hidden[-1]), temperature, top_k, top_p, generator)
        out.append(next_id)
        if on_token is not None:
            on_token(next_id)
        if next_id in stop:
            break
        position = len(input_ids) + len(out) - 1
        tokens = torch.tensor([next_id], device=device)
        positions = torch.tensor([position], device=device)
    return out
