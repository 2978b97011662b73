"""The prompt-lookup (n-gram) proposer: drafts are what followed an earlier occurrence of the last n tokens."""

from collections.abc import Container

from temper.engine.config import SpeculativeConfig
from temper.engine.sequence import Sequence


class NgramProposer:
    """Find the latest earlier occurrence of the sequence's last n tokens; propose what followed it."""

    def __init__(self, cfg: SpeculativeConfig):
        self.cfg = cfg
        # seq id -> (n -> n-gram -> end of its latest occurrence, n -> tokens indexed so far), while it runs.
        self.indexes: dict[int, tuple[dict[int, dict[tuple[int, ...], int]], dict[int, int]]] = {}

    def propose_batch(self, asks: list[tuple[Sequence, int]]) -> list[list[int]]:
        return [self._propose(seq, max_tokens) for seq, max_tokens in asks]

    def _propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        toks = seq.token_ids
        k = min(self.cfg.num_tokens, max_tokens)
        if k <= 0:
            return []
        indexes, indexed_upto = self.indexes.get(seq.seq_id) or self.indexes.setdefault(seq.seq_id, ({}, {}))
        for n in range(self.cfg.ngram_max, self.cfg.ngram_min - 1, -1):
            if len(toks) <= n:
                continue
            index = indexes.setdefault(n, {})
            # Index every n-gram that ends before the last token (incremental: O(new tokens)).
            for end in range(max(indexed_upto.get(n, n), n), len(toks)):
                index[tuple(toks[end - n:end])] = end
            indexed_upto[n] = len(toks)
            end = index.get(tuple(toks[len(toks) - n:]))
            # The suffix itself (ending at len(toks)) is not indexed yet, so a hit is an earlier occurrence.
            if end is not None and end < len(toks):
                return toks[end:end + k]
        return []

    def retain(self, seq_ids: Container[int]) -> None:
        # A dropped index is rebuilt from the tokens alone: the same latest occurrences, so the same drafts.
        for seq_id in [s for s in self.indexes if s not in seq_ids]:
            del self.indexes[seq_id]
