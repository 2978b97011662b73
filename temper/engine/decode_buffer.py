"""The decode buffer: every decoding sequence's own keys and values, contiguous, kept across steps.

Decode attention wants each row's keys as one [tokens, head_dim] matrix per head. Gathering them
from the paged cache every step copies the whole batch's KV once per layer: as much memory
traffic as the attention itself. A decoding sequence changes by one token a step, so the buffer
keeps last step's matrices: a row that decoded last step only appends its new token; any other
row (new, recomputed after preemption, just verified speculative drafts, or whose shared prefix
changed) is gathered once. Row i of the decode batch sits in slot i, so the batch is one strided
view of the buffer that attention reads in place.

The paged cache stays the truth (prefix caching, preemption, prefill read it); the buffer holds
exactly the values a gather would return (the same dequantization), so results do not change.
It lives only within `budget_bytes`: past that (very long contexts, huge batches) the engine
gathers as before. A sequence's own tokens are those after its cascade group's shared prefix.
"""

from dataclasses import dataclass

import torch

from temper.engine.lazy_memory import lazy_zeros
from temper.models import ModelConfig


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass
class BufferStep:
    """What the attention backend needs from the buffer for one step (decode rows in slot order)."""

    k: torch.Tensor  # [layers, S, Hkv, C, D]
    v: torch.Tensor
    lengths: torch.Tensor  # [B] own tokens of each row, its new one included
    max_length: int
    refill_slots: torch.Tensor  # [R] slots to gather whole this step
    refill_blocks: torch.Tensor  # [R * M] their own blocks, padded by repeating a real block
    refill_tokens: int  # M * block_size

    def __post_init__(self) -> None:
        # where each row's new token goes (every layer writes there: computed once per step, not per layer)
        self.rows = torch.arange(self.lengths.shape[0], device=self.lengths.device)
        self.last = self.lengths - 1


class DecodeBuffer:
    def __init__(self, cfg: ModelConfig, budget_bytes: int, max_slots: int, device: torch.device | str = "cpu",
                 refill_full_blocks: bool = False):
        """`refill_full_blocks`: the cache changes a block's stored values when its last token is written (int4
        keys, quantized per block then), so a row whose new token fills a block is gathered whole again."""
        self.cfg, self.budget, self.max_slots = cfg, budget_bytes, max_slots
        self.refill_full_blocks = refill_full_blocks
        self.device = torch.device(device)  # the KV cache's
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.state: dict[int, tuple[int, int, int]] = {}  # seq id -> (slot, skip, own tokens held)
        self.refilled_rows = 0  # rows gathered whole (tests: the buffer really ran)
        self.appended_rows = 0  # rows that only appended their new token
        self.fallback_steps = 0  # steps over budget, gathered from the paged cache instead

    def _bytes(self, slots: int, capacity: int) -> int:
        c = self.cfg
        return 2 * 4 * c.num_hidden_layers * slots * c.num_key_value_heads * capacity * c.head_dim

    def reset(self) -> None:
        self.k = self.v = None
        self.state = {}

    def _reserve(self, slots: int, capacity: int, reach: int) -> bool:
        """Room for `slots` rows of `capacity` tokens; when it must grow, room for `reach` (the most
        the rows can grow to) if the budget allows, so that a batch growing token by token does not
        reallocate over and over."""
        have_s, have_c = (self.k.shape[1], self.k.shape[3]) if self.k is not None else (0, 0)
        if slots <= have_s and capacity <= have_c:
            return True
        s = max(have_s, min(slots + slots // 4, self.max_slots))
        for c in (max(have_c, capacity, reach), max(have_c, _round_up(capacity + capacity // 4, 64)),
                  max(have_c, capacity)):
            if self._bytes(s, c) <= self.budget:
                break
        else:
            self.reset()
            return False
        shape = (self.cfg.num_hidden_layers, s, self.cfg.num_key_value_heads, c, self.cfg.head_dim)
        # Zeros, never uninitialised memory: masked slots are still multiplied (0 * NaN = NaN).
        k, v = lazy_zeros(shape, torch.float32, self.device), lazy_zeros(shape, torch.float32, self.device)
        if self.k is not None:  # rows held so far stay valid; only their used length is copied (not zeros)
            used = min(have_c, max((held for _, _, held in self.state.values()), default=0))
            k[:, :have_s, :, :used] = self.k[:, :, :, :used]
            v[:, :have_s, :, :used] = self.v[:, :, :, :used]
        self.k, self.v = k, v
        return True

    def plan(self, seq_ids: list[int], skips: list[int], lengths: list[int], reach: list[int],
             tables: list[list[int]], block_size: int) -> tuple[list[int], BufferStep] | None:
        """Slots for this step's decode rows (a permutation of range(B), per row), or None: over budget.

        `lengths` are the rows' own tokens including the one decoded now, `reach` the most own tokens
        each can come to hold, `tables` their own blocks."""
        b = len(seq_ids)

        def current(i: int, skip: int, held: int) -> bool:
            """Whether row i's kept tokens are still what a gather returns: the same shared prefix, every own token
            but the new one, and not a block the new token fills when the cache then changes it (own tokens start
            on a block boundary: a shared prefix is whole blocks)."""
            fills = self.refill_full_blocks and lengths[i] % block_size == 0
            return skip == skips[i] and held == lengths[i] - 1 and not fills

        # Refills write whole blocks, so capacities are whole blocks.
        if not self._reserve(b, _round_up(max(lengths), block_size), _round_up(max(reach), block_size)):
            self.fallback_steps += 1
            return None
        slots: list[int] = [-1] * b
        for i, sid in enumerate(seq_ids):  # rows that decoded last step keep their slot if in range
            slot, skip, held = self.state.get(sid, (b, -1, -1))
            if slot < b and current(i, skip, held):
                slots[i] = slot
        free = sorted(set(range(b)) - set(slots), reverse=True)
        moves: list[tuple[int, int]] = []
        refill: list[int] = []
        for i, sid in enumerate(seq_ids):
            if slots[i] >= 0:
                continue
            slots[i] = free.pop()
            slot, skip, held = self.state.get(sid, (-1, -1, -1))
            if slot >= b and current(i, skip, held):
                moves.append((slot, slots[i]))  # valid rows beyond the batch move down
            else:
                refill.append(i)
        if moves:  # sources are all >= b, destinations < b: no move overwrites another's source
            src, dst = (torch.tensor(x, device=self.device) for x in zip(*moves, strict=True))
            self.k[:, dst], self.v[:, dst] = self.k[:, src], self.v[:, src]
        m = max((len(tables[i]) for i in refill), default=0)
        blocks = [blk for i in refill for blk in tables[i] + tables[i][:1] * (m - len(tables[i]))]
        self.state = {sid: (slots[i], skips[i], lengths[i]) for i, sid in enumerate(seq_ids)}
        self.refilled_rows += len(refill)
        self.appended_rows += b - len(refill)
        by_slot = [0] * b
        for i, slot in enumerate(slots):
            by_slot[slot] = lengths[i]
        dev = self.device
        step = BufferStep(self.k, self.v, torch.tensor(by_slot, device=dev), max(lengths),
                          torch.tensor([slots[i] for i in refill], dtype=torch.long, device=dev),
                          torch.tensor(blocks, dtype=torch.long, device=dev), m * block_size)
        return slots, step
