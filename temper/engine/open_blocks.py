"""Open blocks: the fp32 keys and values of int4 cache blocks that are not full yet.

The int4 cache quantizes a block's keys per channel over the block's tokens (as KIVI does: keys carry
per-channel structure that per-token scales pay for on every token), which needs the whole block. Until
its last token is written a block's keys live here, in fp32, in a slot of a small pool; the write of its
last offset quantizes them into the cache. Its values are quantized as they are written (per token) and
kept here too. Reads of an open block are served from its slot, so the tokens a sequence is writing now
(its last, partial block) are exact, as KIVI keeps its most recent tokens in full precision.

A closed block keeps its slot until the pool needs it (least recently used first), so a write into a
block that just closed (a speculative draft rejected after it filled the block, a recomputation) reopens
it from its fp32 rows. When the pool has no slot to spare it grows; a slot taken from an open block that
no step touched for a while (a finished or preempted sequence's last block: the cache is not told when
blocks are freed) closes that block first, with whatever rows it holds. Reopening a block whose slot is
gone starts from its dequantized rows: less exact, never wrong.

The model runner plans each step from its host-side lists of written rows (which blocks open, which
close) before the forward, and every layer's write follows the plan.
"""

from collections import OrderedDict
from collections.abc import Callable, Collection

import torch

from temper.engine.lazy_memory import lazy_zeros

# (layer or None for every layer, blocks, slots) -> None: quantize those slots' keys into those blocks
Close = Callable[[int | None, torch.Tensor, torch.Tensor], None]
# (blocks) -> fp32 keys and values [2, layers, kv_heads, n, block_size, head_dim] as the cache holds them
Load = Callable[[torch.Tensor], torch.Tensor]


class OpenBlocks:
    def __init__(self, layers: int, kv_heads: int, num_blocks: int, block_size: int, head_dim: int,
                 device: torch.device, close: Close, load: Load, slots: int = 8):
        self.shape = (layers, kv_heads, block_size, head_dim)
        self.block_size, self.device, self._close, self._load = block_size, device, close, load
        self.rows = self._new_pool(slots)  # keys and values: [2, layers, kv_heads, slots, block_size, head_dim]
        self.slot_of = torch.full((num_blocks,), -1, dtype=torch.long, device=device)  # -1: not open
        self.held: OrderedDict[int, int] = OrderedDict()  # block -> slot, open or closed, least recent first
        self.open: set[int] = set()
        self.free = list(range(slots))[::-1]
        self._plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # slots, closing blocks, slots
        self.reopened = 0  # closed blocks written again (tests: the path really ran)
        self.forced = 0  # open blocks closed to free their slot

    def _new_pool(self, slots: int) -> torch.Tensor:
        layers, hkv, bs, d = self.shape
        with torch.inference_mode(False):  # grown during a step, written by forks outside one
            return lazy_zeros((2, layers, hkv, slots, bs, d), torch.float32, self.device)

    def plan(self, blocks: list[int], positions: list[int]) -> None:
        """Before a step's forward, its written (block, position) rows: gives every written block a slot, and
        closes those whose last offset is written."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for b, p in zip(blocks, positions, strict=True):
            o = p % self.block_size
            first[b], last[b] = min(o, first.get(b, o)), max(o, last.get(b, o))
        for b, o in first.items():
            if b not in self.open:
                self._reopen(b, o, first.keys())
            self.held.move_to_end(b)
        slots = self.slot_of[torch.tensor(blocks, dtype=torch.long, device=self.device)]
        closing = [b for b, o in last.items() if o == self.block_size - 1]
        for b in closing:  # read from the cache from now on (each layer quantizes its keys as it writes them)
            self.open.discard(b)
            self.slot_of[b] = -1
        self._plan = (slots, torch.tensor(closing, dtype=torch.long, device=self.device),
                      torch.tensor([self.held[b] for b in closing], dtype=torch.long, device=self.device))

    def write(self, layer: int, offsets: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Rotated keys and values [N, kv_heads, D] of the planned rows; quantizes the keys of the blocks they
        fill."""
        assert self._plan is not None and self._plan[0].shape[0] == keys.shape[0], "plan() comes first each step"
        slots, closing, their_slots = self._plan
        self.rows[0, layer][:, slots, offsets] = keys.transpose(0, 1)
        self.rows[1, layer][:, slots, offsets] = values.transpose(0, 1)
        if closing.numel():
            self._close(layer, closing, their_slots)

    def _reopen(self, block: int, first_offset: int, touched: Collection[int]) -> None:
        slot = self.held.get(block)
        if slot is None:
            slot = self._take(touched)
            self.held[block] = slot
            if first_offset > 0:  # rows written before, whose fp32 is gone: start from what the cache holds
                self.rows[:, :, :, slot] = self._load(torch.tensor([block], device=self.device))[:, :, :, 0]
        elif first_offset > 0:  # a closed block written again (a rejected draft had filled it): its rows are here
            self.reopened += 1
        if first_offset == 0:  # a block filled from its start: rows not yet written take no part in its scales
            self.rows[:, :, :, slot].zero_()
        self.open.add(block)
        self.slot_of[block] = slot

    def _take(self, touched: Collection[int]) -> int:
        """A free slot; else the least recently used one this step does not write (closing its block if
        it is open); else a bigger pool."""
        if self.free:
            return self.free.pop()
        for b, slot in self.held.items():
            if b in touched:
                continue
            if b in self.open:
                self.forced += 1
                self._close(None, torch.tensor([b], device=self.device), torch.tensor([slot], device=self.device))
                self.open.discard(b)
                self.slot_of[b] = -1
            del self.held[b]
            return slot
        have = self.rows.shape[3]
        grown = self._new_pool(2 * have)
        grown[:, :, :, :have] = self.rows
        self.rows = grown
        self.free = list(range(have + 1, 2 * have))[::-1]
        return have

    def copy(self, src: int, dst: int) -> None:
        """Block `dst` now holds `src`'s rows (a forked partial block): it opens with a copy of src's slot. The
        only way rows reach a block without a planned write, so whatever `dst` held before is dropped first (a
        freed block can still be open here: the last block of a sequence that finished)."""
        if (old := self.held.pop(dst, None)) is not None:
            self.free.append(old)
        self.open.discard(dst)
        self.slot_of[dst] = -1
        if src not in self.open:
            return
        slot = self._take({src})
        self.rows[:, :, :, slot] = self.rows[:, :, :, self.held[src]]
        self.held[dst] = slot
        self.open.add(dst)
        self.slot_of[dst] = slot

    def _open_among(self, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(indices into `blocks`, their slots) of the open ones. A block may be listed more than once, so
        how many match is known only from the data: on an accelerator this syncs (once per gather of an
        int4 cache's keys while some block is open); a meta tensor has no data to patch."""
        if not self.open or blocks.is_meta:
            return None
        slots = self.slot_of[blocks]
        where = (slots >= 0).nonzero()[:, 0]
        return (where, slots[where]) if where.numel() else None

    def patch(self, which: str, layer: int, blocks: torch.Tensor, out: torch.Tensor) -> None:
        """Gathered keys or values out [kv_heads, M, block_size, D] of `blocks` [M]: open ones replaced by
        their rows."""
        if (found := self._open_among(blocks)) is not None:
            out[:, found[0]] = self.rows[int(which == "v"), layer][:, found[1]]

    def patch_rows(self, which: str, layer: int, blocks: torch.Tensor, offsets: torch.Tensor,
                   out: torch.Tensor) -> None:
        """Read keys or values out [kv_heads, N, D] at (block, offset) rows: open ones replaced by their rows."""
        if (found := self._open_among(blocks)) is not None:
            out[:, found[0]] = self.rows[int(which == "v"), layer][:, found[1], offsets[found[0]]]
