"""Structured outputs in the engine: compiled grammars, one matcher per sample, the token masks.

xgrammar does the work (chosen on per-token cost on this CPU: `benchmarks/grammar_bench.py`
measured 4 us per token against llguidance's 16 and outlines-core's 214). A request's constraint
is compiled once (cached by its text; `compiled` may run on any thread, so a server compiles a
request's constraint off the engine's thread and the engine then finds it cached); each of its
samples gets a `GrammarMatcher` that follows
the sample's tokens. Before sampling, each constrained row's logits are masked to what the
matcher allows; a row that verifies speculative drafts gets the mask of the state after the
drafts before it, so a kept draft is the constrained greedy choice and speculation stays lossless.
"""

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch

from temper.generation.sampling_params import RequestError
from temper.generation.structured_outputs import StructuredOutputs


class Grammars:
    """The engine's compiler (built on first use: ~0.1 s for a 49k vocabulary) and compile cache."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int], cache_size: int = 64):
        self.tokenizer, self.vocab_size, self.stop_ids = tokenizer, vocab_size, stop_ids
        self._compiler: Any = None
        self._cache: OrderedDict[StructuredOutputs, Any] = OrderedDict()
        self._pins: dict[StructuredOutputs, int] = {}  # constraints compiled for a request not yet queued
        self.cache_size = cache_size
        self._lock = threading.Lock()  # the cache and the compiler's creation: `compiled` runs on any thread

    def matcher(self, so: StructuredOutputs, where: str) -> Any:
        """A fresh matcher for one sample; RequestError (naming `where` and the field) if it cannot compile."""
        import xgrammar as xgr

        return xgr.GrammarMatcher(self.compiled(so, where))

    def compiled(self, so: StructuredOutputs, where: str) -> Any:
        """The compiled grammar, from the cache or compiled now (on the caller's thread); RequestError."""
        if self.tokenizer is None:
            raise RequestError(f"{where}: sampling_params.structured needs the engine's tokenizer (it has none)")
        with self._lock:
            compiled = self._cache.get(so)
            if compiled is not None:
                self._cache.move_to_end(so)
                return compiled
        try:
            compiled = self._compile(so)
        except (RuntimeError, ValueError, TypeError) as exc:  # xgrammar's errors for a bad schema/grammar
            raise RequestError(f"{where}: sampling_params.structured.{so.kind}: cannot compile it "
                               f"({str(exc).splitlines()[0][:300]})") from None
        with self._lock:
            self._cache[so] = compiled
            self._evict()
        return compiled

    @contextlib.contextmanager
    def pinned(self, so: StructuredOutputs | None) -> Iterator[None]:
        """Keep `so`'s compiled grammar cached until the request that compiled it (off the engine's thread, under
        a time limit) is queued: evicted in between, it would compile again with no limit."""
        if so is None:
            yield
            return
        with self._lock:
            self._pins[so] = self._pins.get(so, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._pins[so] -= 1
                if not self._pins[so]:
                    del self._pins[so]
                self._evict()

    def _evict(self) -> None:
        """The least recently used unpinned entries, down to `cache_size` (with the lock held)."""
        for key in [k for k in self._cache if k not in self._pins][:max(0, len(self._cache) - self.cache_size)]:
            del self._cache[key]

    def _compile(self, so: StructuredOutputs) -> Any:
        import xgrammar as xgr

        with self._lock:
            if self._compiler is None:
                self._compiler = xgr.GrammarCompiler(
                    tokenizer_info(self.tokenizer, self.vocab_size, self.stop_ids), max_threads=1)
            c = self._compiler
        if so.json is not None:
            # No free whitespace: JSON as json.dumps writes it. A small model sampling at T=1 can
            # otherwise spend its whole budget on spaces and newlines the grammar allows.
            return c.compile_json_schema(so.json, any_whitespace=False)
        if so.json_object:
            return c.compile_json_schema('{"type": "object"}', any_whitespace=False, strict_mode=False)
        if so.regex is not None:
            return c.compile_regex(so.regex)
        if so.choice is not None:
            return c.compile_grammar("root ::= " + " | ".join(_literal(s) for s in so.choice))
        if so.grammar is not None:
            return c.compile_grammar(so.grammar)
        return c.compile_structural_tag(so.structural_tag)


def tokenizer_info(tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> Any:
    """xgrammar's view of the vocabulary, from temper's Tokenizer (its `tokenizers` backend) or an HF one."""
    import xgrammar as xgr

    backend = getattr(tokenizer, "backend", None)
    if backend is None or not hasattr(backend, "to_str"):
        return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
    vocab = [""] * vocab_size
    for token, idx in backend.get_vocab(with_added_tokens=True).items():
        if idx < vocab_size:
            vocab[idx] = token
    # the vocabulary's encoding (byte-level, SentencePiece byte fallback, raw) as from_huggingface reads it
    meta = xgr.TokenizerInfo._detect_metadata_from_hf(backend.to_str())
    return xgr.TokenizerInfo(vocab, vocab_type=meta["vocab_type"], vocab_size=vocab_size, stop_token_ids=stop_ids,
                             add_prefix_space=meta["add_prefix_space"])


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def valid_prefix(matcher: Any, tokens: list[int]) -> int:
    """How many leading `tokens` the matcher accepts (its state is left unchanged)."""
    n = 0
    while n < len(tokens) and matcher.accept_token(tokens[n]):
        n += 1
    if n:
        matcher.rollback(n)
    return n


def token_bitmask(rows: list[tuple[Any, list[int]]], vocab_size: int) -> tuple[torch.Tensor, list[int]] | None:
    """The allowed-token bitmask of each row (matcher, the drafts sampled before it in the same step)
    and the indices of the constrained rows; None when no row is constrained."""
    constrained = [i for i, (m, _) in enumerate(rows) if m is not None]
    if not constrained:  # the usual step: no import, no allocation
        return None
    import xgrammar as xgr

    mask = xgr.allocate_token_bitmask(len(rows), vocab_size)
    for i in constrained:
        matcher, before = rows[i]
        for t in before:
            matcher.accept_token(t)
        matcher.fill_next_token_bitmask(mask, i)
        if before:
            matcher.rollback(len(before))
    return mask, constrained


def apply_bitmask(logits: torch.Tensor, bitmask: tuple[torch.Tensor, list[int]]) -> None:
    """Disallowed tokens of the constrained rows to -inf, in place (logits float32 [R, V])."""
    import xgrammar as xgr

    mask, rows = bitmask
    mask = mask.to(logits.device)  # xgrammar fills it on the host; a no-op on the CPU
    # on CPU its C++ kernel (7 us a row here); "auto" measured 10x slower
    xgr.apply_token_bitmask_inplace(logits, mask, vocab_size=logits.shape[-1], indices=rows,
                                    backend="cpu" if logits.device.type == "cpu" else "auto")
