"""Speculative decoding with a small draft model: greedy drafts from the draft's own KV cache.

Each step the draft catches up on the tokens the target produced since its last proposal
(rejected drafts are rolled back first: their cache positions are simply reused), then
drafts one token per forward. All speculating sequences draft in the same forwards.
The draft must share the target's tokenizer; only its vocabulary size is checkable here.
"""

import dataclasses
from collections.abc import Container

import torch
from torch import nn

from temper.engine.config import SpeculativeConfig
from temper.engine.draft_cache import DraftAttention, DraftSegment, SequenceKV
from temper.engine.sequence import Sequence
from temper.errors import TemperError
from temper.models import LlamaForCausalLM


def truncated_draft(model: LlamaForCausalLM, num_layers: int) -> LlamaForCausalLM:
    """The first `num_layers` decoder layers of `model` with its embeddings, final norm and head.

    Every weight is shared with `model` (no copy), so in-place weight updates reach the draft."""
    total = model.config.num_hidden_layers
    if not 1 <= num_layers <= total:
        raise TemperError(f"engine.speculative.draft_layers={num_layers}: the draft model has {total} layers")
    with torch.device("meta"):  # placeholders only: every module is replaced by the model's own
        draft = LlamaForCausalLM(dataclasses.replace(model.config, num_hidden_layers=num_layers))
    draft.model.embed_tokens, draft.model.norm = model.model.embed_tokens, model.model.norm
    draft.model.rotary, draft.lm_head = model.model.rotary, model.lm_head
    draft.model.layers = nn.ModuleList(list(model.model.layers)[:num_layers])
    return draft.eval()


def build_draft(cfg: SpeculativeConfig, target: LlamaForCausalLM,
                draft: LlamaForCausalLM | None = None) -> LlamaForCausalLM:
    """The draft for method='draft': `draft`, else `cfg.draft_model` loaded, else the target; cut to `draft_layers`."""
    if draft is None and cfg.draft_model is not None:
        from temper.models import load_model

        try:
            draft = load_model(cfg.draft_model, device=next(target.parameters()).device).model
        except TemperError as exc:
            raise TemperError(f"engine.speculative.draft_model={cfg.draft_model!r}: {exc}") from exc
    if draft is None and cfg.draft_layers is None:
        raise TemperError("engine.speculative.method='draft' needs engine.speculative.draft_model (a model name or "
                          "path) or engine.speculative.draft_layers (the target's first layers as the draft)")
    draft = draft if draft is not None else target
    return truncated_draft(draft, cfg.draft_layers) if cfg.draft_layers is not None else draft


@dataclasses.dataclass
class DraftState:
    """One sequence as the draft has seen it: `fed` tokens have their keys and values in `cache`."""

    cache: SequenceKV
    fed: list[int] = dataclasses.field(default_factory=list)
    committed: int = 0  # fed[:committed] are known to be the sequence's own tokens

    def rollback(self, tokens: list[int]) -> int:
        """Keep the cached prefix that equals `tokens`, leaving at least the last token to feed."""
        common = min(self.committed, len(tokens) - 1)
        limit = min(len(self.fed), len(tokens) - 1)
        while common < limit and self.fed[common] == tokens[common]:
            common += 1
        del self.fed[common:]
        self.cache.length = common
        return common


class DraftModelProposer:
    """Greedy drafts of `num_tokens` tokens from a draft model, one cache per sequence (kept while it runs)."""

    def __init__(self, draft: LlamaForCausalLM, target_vocab_size: int, cfg: SpeculativeConfig):
        vocab = draft.config.vocab_size
        if vocab > target_vocab_size:
            raise TemperError(f"engine.speculative.draft_model: the draft's vocabulary ({vocab} tokens) is larger "
                              f"than the target's ({target_vocab_size}); the draft must use the target's tokenizer")
        self.draft, self.vocab, self.num_tokens = draft.eval(), vocab, cfg.num_tokens
        self.dtype, self.device = draft.lm_head.weight.dtype, draft.lm_head.weight.device
        self.states: dict[int, DraftState] = {}

    @torch.inference_mode()
    def propose_batch(self, asks: list[tuple[Sequence, int]]) -> list[list[int]]:
        drafts: list[list[int]] = [[] for _ in asks]
        # (index in asks, state, tokens to feed, drafts wanted); the first feed is the catch-up.
        feeds: list[tuple[int, DraftState, list[int], int]] = []
        for i, (seq, max_tokens) in enumerate(asks):
            want = min(self.num_tokens, max_tokens)
            if want <= 0:
                continue
            state = self.states.get(seq.seq_id)
            if state is None:
                cache = SequenceKV(self.draft.config, max(256, len(seq) + 64), self.dtype, self.device)
                state = self.states[seq.seq_id] = DraftState(cache)
            new = seq.token_ids[state.rollback(seq.token_ids):]
            if max(new) >= self.vocab:
                continue  # a token the draft has no embedding for: this sequence is not drafted
            state.committed = len(seq)
            feeds.append((i, state, new, want))
        while feeds:
            tokens = self._next_tokens([(state, new) for _, state, new, _ in feeds])
            going = []
            for (i, state, _, want), token in zip(feeds, tokens, strict=True):
                drafts[i].append(token)
                if len(drafts[i]) < want:
                    going.append((i, state, [token], want))
            feeds = going
        return drafts

    def _next_tokens(self, feeds: list[tuple[DraftState, list[int]]]) -> list[int]:
        """Feed each state its tokens in one packed forward; the draft's greedy next token for each."""
        ids: list[int] = []
        positions: list[int] = []
        segments: list[DraftSegment] = []
        for state, new in feeds:
            start = state.cache.length
            state.cache.reserve(start + len(new))
            segments.append(DraftSegment(len(ids), state.cache, start, len(new)))
            ids.extend(new)
            positions.extend(range(start, start + len(new)))
        attention = DraftAttention(segments, self.draft.config.sliding_window)
        dev = self.device
        hidden = self.draft(torch.tensor(ids, device=dev)[None], torch.tensor(positions, device=dev)[None],
                            attention=attention)[0]
        last = [seg.row + seg.length - 1 for seg in segments]
        tokens = self.draft.compute_logits(hidden[last]).argmax(-1).tolist()
        for (state, new), seg in zip(feeds, segments, strict=True):
            state.fed.extend(new)
            state.cache.length = seg.start + seg.length
        return tokens

    def retain(self, seq_ids: Container[int]) -> None:
        for seq_id in [s for s in self.states if s not in seq_ids]:
            del self.states[seq_id]
