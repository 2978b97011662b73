"""Speculative decoding: what a proposer is, and the prompt-lookup (n-gram) one.

Drafts are verified by the target model in one forward of [last token, drafts...]; the
longest prefix whose tokens equal the target's greedy choice is kept, plus the target's
own next token. Under greedy decoding the output is therefore the plain engine's, by
construction (up to fp32 rounding of a different batch shape). Only greedy, unpenalised
samples speculate. The draft-model proposer is in `draft_proposer.py`.
"""

from collections.abc import Container

from temper.engine.config import SpeculativeConfig
from temper.engine.sequence import Sequence


class Proposer:
    """Drafts up to `max_tokens` tokens to follow a sequence; the engine verifies them."""

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        raise NotImplementedError

    def propose_batch(self, asks: list[tuple[Sequence, int]]) -> list[list[int]]:
        """Drafts for every (sequence, max_tokens) of one step; a model-based proposer batches them."""
        return [self.propose(seq, max_tokens) for seq, max_tokens in asks]

    def retain(self, seq_ids: Container[int]) -> None:
        """Forget the state of sequences not in `seq_ids` (finished, aborted, preempted)."""


class NgramProposer(Proposer):
    """Find the latest earlier occurrence of the sequence's last n tokens; propose what followed it."""

    def __init__(self, cfg: SpeculativeConfig):
        self.cfg = cfg

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        toks = seq.token_ids
        k = min(self.cfg.num_tokens, max_tokens)
        if k <= 0:
            return []
        for n in range(self.cfg.ngram_max, self.cfg.ngram_min - 1, -1):
            if len(toks) <= n:
                continue
            index = seq.ngram_index.setdefault(n, {})
            # Index every n-gram that ends before the last token (incremental: O(new tokens)).
            for end in range(max(seq.ngram_indexed_upto.get(n, n), n), len(toks)):
                index[tuple(toks[end - n:end])] = end
            seq.ngram_indexed_upto[n] = len(toks)
            end = index.get(tuple(toks[len(toks) - n:]))
            # The suffix itself (ending at len(toks)) is not indexed yet, so a hit is an earlier occurrence.
            if end is not None and end < len(toks):
                return toks[end:end + k]
        return []
