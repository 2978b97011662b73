"""Speculative decoding: who drafts, how many tokens each sequence drafts, and what the target kept.

Drafts are verified by the target model in one forward of [last token, drafts...]; the
longest prefix whose tokens equal the target's greedy choice is kept, plus the target's
own next token. Under greedy decoding the output is therefore the plain engine's, by
construction (up to fp32 rounding of a different batch shape). Only greedy, unpenalised
samples speculate. The proposers are in `ngram_proposer.py` and `draft_proposer.py`; each has
`propose_batch([(sequence, most tokens)])` and `retain(seq ids)` (forget every other sequence).
"""

from collections.abc import Iterable

from temper.engine.config import SpeculativeConfig
from temper.engine.draft_proposer import DraftModelProposer, build_draft
from temper.engine.grammar import valid_prefix
from temper.engine.ngram_proposer import NgramProposer
from temper.engine.sampler import _penalized
from temper.engine.sequence import Sequence
from temper.errors import TemperError
from temper.models import LlamaForCausalLM


class Speculator:
    """The engine's speculation: `drafts` before a step, `accept` for each verified draft after it,
    `retain` once a step, an abort or a weight update is done. `stats` is the engine's counters."""

    def __init__(self, cfg: SpeculativeConfig, target: LlamaForCausalLM, max_model_len: int, stats: dict[str, int],
                 draft_model: LlamaForCausalLM | None = None):
        if draft_model is not None and cfg.method != "draft":
            raise TemperError(f"LLMEngine(draft_model=...) needs engine.speculative.method='draft' ({cfg.method!r})")
        self.cfg, self.max_model_len, self.stats = cfg, max_model_len, stats
        self.proposer: NgramProposer | DraftModelProposer | None = None
        if cfg.method == "ngram":
            self.proposer = NgramProposer(cfg)
        elif cfg.method == "draft":
            self.proposer = DraftModelProposer(build_draft(cfg, target, draft_model), target.config.vocab_size, cfg)
        self.draft_lens: dict[Sequence, int] = {}  # adaptive: the tokens a sequence proposes next (until it ends)

    def speculates(self, seq: Sequence) -> bool:
        """Drafts are verified losslessly only for greedy, unpenalised sequences without stop strings, of
        requests that may speculate (`add_request(speculate=...)`)."""
        return (seq.speculate and seq.num_pending == 1 and seq.params.greedy and not _penalized(seq)
                and not seq.params.stop)

    def drafts(self, running: list[Sequence]) -> dict[int, list[int]]:
        """This step's draft of every speculating sequence that has one (seq id -> tokens)."""
        if self.proposer is None:
            return {}
        spec, first = self.cfg, min(self.cfg.initial_tokens, self.cfg.num_tokens)
        # Drafts leave room for the target's own next token, within max_tokens and the context.
        asks = [(seq, min(seq.params.max_tokens - seq.num_output_tokens - 1, self.max_model_len - len(seq) - 1,
                          self.draft_lens.setdefault(seq, first) if spec.adaptive else spec.num_tokens))
                for seq in running if self.speculates(seq)]
        proposals = self.proposer.propose_batch(asks) if asks else []
        # A structured sample keeps only the draft tokens its grammar allows: the rest could not be kept.
        proposals = [d[:valid_prefix(seq.matcher, d)] if seq.matcher is not None and d else d
                     for (seq, _), d in zip(asks, proposals, strict=True)]
        return {seq.seq_id: d for (seq, _), d in zip(asks, proposals, strict=True) if d}

    def accept(self, seq: Sequence, drafts: list[int], tokens: list[int]) -> int:
        """How many leading `drafts` equal the target's own `tokens` (counted in stats). The draft length
        adapts as in transformers' assisted generation: longer while drafts hold, shorter once one fails."""
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == tokens[accepted]:
            accepted += 1
        self.stats["draft_tokens"] += len(drafts)
        self.stats["accepted_tokens"] += accepted
        if self.cfg.adaptive:
            n = self.draft_lens[seq]
            self.draft_lens[seq] = max(1, min(n + 2 if accepted == len(drafts) else n - 1, self.cfg.num_tokens))
        return accepted

    def retain(self, running: Iterable[Sequence]) -> None:
        """Proposer state lives while its sequence runs (a preempted one's is rebuilt when it returns; new
        weights make a draft's caches stale: retain(())); a draft length lives until its sequence ends."""
        if self.proposer is None:
            return
        self.proposer.retain({seq.seq_id for seq in running})
        for seq in [s for s in self.draft_lens if s.finished]:
            del self.draft_lens[seq]
