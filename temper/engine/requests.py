"""A request (its samples and callbacks) and the checks a prompt must pass before it runs."""

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field

from temper.engine.sequence import Sequence
from temper.generation.completion import Completion, TokenEvent
from temper.generation.sampling_params import RequestError

TokenCallback = Callable[[TokenEvent], None]
FinishCallback = Callable[[Completion], None]


@dataclass
class Request:
    request_id: str
    seqs: list[Sequence]
    on_token: TokenCallback | None = None
    on_finish: FinishCallback | None = None
    done: list[Completion] = field(default_factory=list)


def prompt_ids(prompt: str | Seq[int], tokenizer, where: str, max_model_len: int, kv_tokens: int,
               vocab_size: int) -> list[int]:
    """Token ids of a prompt, or RequestError naming the request (`where`) and what is wrong."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise RequestError(f"{where}: a text prompt needs a tokenizer; pass token ids")
        ids = tokenizer.encode(prompt, add_special_tokens=False)
    else:
        ids = [int(t) for t in prompt]
    if not ids:
        raise RequestError(f"{where}: prompt is empty")
    if len(ids) >= max_model_len:
        raise RequestError(f"{where}: prompt has {len(ids)} tokens; the context holds {max_model_len} "
                           f"(prompt + at least one new token)")
    if len(ids) + 1 > kv_tokens:
        raise RequestError(f"{where}: prompt of {len(ids)} tokens does not fit the KV budget ({kv_tokens} tokens)")
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise RequestError(f"{where}: prompt token id {bad[0]} is outside the vocabulary")
    return ids


def eos_ids(tokenizer, fallback: int | list[int] | None) -> set[int]:
    """The tokenizer's end-of-sequence ids, else the model config's."""
    ids = getattr(tokenizer, "eos_token_ids", None)
    if ids:
        return set(ids)
    if getattr(tokenizer, "eos_token_id", None) is not None:
        return {tokenizer.eos_token_id}
    if fallback is None:
        return set()
    return set(fallback) if isinstance(fallback, list) else {fallback}
