"""The engine's attention backend: writes new keys/values into the paged cache, then attends.

One forward runs all scheduled tokens packed as [1, N]: first the decoding sequences (one
token each), then the segments (prefill chunks, speculative verification) of the others.
Decode rows attend in one batched pass over their own keys: read in place from the decode
buffer (see decode_buffer.py), or, without it, gathered from their blocks once per layer,
head-major; either way each (kv head, sequence) is one matmul for all the query heads of its
group. Decode rows whose
tables start with the same cached blocks (the n samples of one prompt) attend to that shared
prefix together (cascade attention): its blocks are gathered once for the group, not once per
row, and the two partial softmaxes (shared prefix, own suffix) are merged by their maxima and
sums, as in flash-decoding. Segments attend
per sequence with SDPA in query chunks, so no [T, T] score matrix is ever built, however long
the prompt. Off the CPU (`sdpa_decode`), decode rows without a shared prefix attend through SDPA
too (its fused kernels); on the CPU the batched matmuls measured faster and stay.
"""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from temper.engine.decode_buffer import BufferStep
from temper.engine.kv_cache import KVCache, transposed_keys
from temper.native import decode_attention, segment_attention

SEGMENT_TOKENS = 64  # segments up to this long (draft verification, short turns) attend through the kernel


@dataclass
class Segment:
    row: int  # first row of the segment in the packed batch
    start: int  # position of its first token (tokens before it are in the cache)
    length: int
    blocks: torch.Tensor  # [M] block ids covering [0, start + length) (sliding window: those still held)
    # sliding window: the position of each gathered key ([M * block_size]); None: blocks are 0, 1, 2, ...
    positions: torch.Tensor | None = None


@dataclass
class Cascade:
    """Groups of decode rows sharing a cached prefix, padded to one shape so that all groups attend
    in a few batched ops: Gr groups, each of at most R rows and P prefix blocks."""

    blocks: torch.Tensor  # [Gr * P] prefix block ids (padding repeats a real block, masked)
    mask: torch.Tensor  # [1, Gr, 1, P * block_size] additive (0 / -inf)
    rows: torch.Tensor  # [Gr * R] decode row of each group slot (padding repeats a real row)
    back: torch.Tensor  # [B] each decode row's group slot, or Gr * R (no group: a null slot)
    num_groups: int
    max_rows: int
    tokens: torch.Tensor  # [Gr] shared tokens of each group's prefix
    group_of_row: torch.Tensor  # [B] each decode row's group, -1 for none
    # (block, generation) of every prefix block: while it is the same, so are the gathered prefixes,
    # which the cache then keeps across steps; None: gathered again each layer and step.
    key: tuple | None = None


@dataclass
class StepMeta:
    write_blocks: torch.Tensor  # [N] block id for each new token
    write_offsets: torch.Tensor  # [N] offset within the block
    num_decode: int = 0
    decode_blocks: torch.Tensor | None = None  # [Bd * M] block ids, padded rows masked
    # Additive (0 / -inf): [1, Bd, 1, M * block_size] over gathered blocks, or [Bd, 1, 1, L] over the buffer.
    decode_mask: torch.Tensor | None = None
    decode_max_blocks: int = 0
    # Cascade attention: decode_blocks/decode_mask then cover only each row's own blocks after
    # its group's shared prefix.
    cascade: "Cascade | None" = None
    buffer: BufferStep | None = None  # decode rows read the decode buffer (slot i = row i), not gathers
    segments: list[Segment] = field(default_factory=list)


def window_mask(qpos: torch.Tensor, kpos: torch.Tensor, window: int, sinks: int) -> torch.Tensor:
    """True where query position may see key position (causal, optional sliding window + sinks)."""
    allowed = kpos[None, :] <= qpos[:, None]
    if window:
        allowed &= (kpos[None, :] > qpos[:, None] - window) | (kpos[None, :] < sinks)
    return allowed


class PagedAttention:
    def __init__(self, cache: KVCache, meta: StepMeta, query_chunk: int = 512, window: int = 0, sinks: int = 0,
                 sdpa_decode: bool = False, native: bool = False):
        """`native` (an fp32 cache on the CPU): decode rows read from the decode buffer go through the C++
        kernel (temper/native), which also stores their new keys and values, and so do short segments that
        follow cached tokens (`native_segment`)."""
        self.cache, self.meta, self.query_chunk = cache, meta, query_chunk
        self.window, self.sinks, self.sdpa_decode = window, sinks, sdpa_decode
        self.kernels = native
        self.native = native and meta.buffer is not None and meta.num_decode > 0
        self._group_slots: torch.Tensor | None = None

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        meta, cache = self.meta, self.cache
        q, k, v = q[0], k[0], v[0]  # [N, H, D]
        nd = meta.num_decode
        if self.native:  # the kernel stores the decode rows' keys and values itself
            if nd < q.shape[0]:
                cache.write(layer, meta.write_blocks[nd:], meta.write_offsets[nd:], k[nd:], v[nd:])
        else:
            cache.write(layer, meta.write_blocks, meta.write_offsets, k, v)
        if nd == q.shape[0]:  # a decode-only step
            return self._decode(layer, q, k, v)[None]
        out = torch.empty_like(q)
        if nd:
            out[:nd] = self._decode(layer, q[:nd], k[:nd], v[:nd])
        for seg in meta.segments:
            rows = slice(seg.row, seg.row + seg.length)
            out[rows] = self._segment(layer, seg, q[rows], k[rows], v[rows])
        return out[None]

    def _decode(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        meta = self.meta
        if self.native:
            return self._decode_native(layer, q, k, v)
        b, hq, d = q.shape
        rot = self.cache.rotation  # int8 blocks hold rotated keys and values
        if rot is not None:
            q = q @ rot
        if meta.buffer is not None:
            o = self._decode_buffered(layer, q, k, v)  # [B, Hkv, G, D]
        else:
            keys = self.cache.gather(layer, "k", meta.decode_blocks)  # [Hkv, B * M, bs, D]
            hkv = keys.shape[0]
            keys = keys.view(hkv, b, -1, d)  # one [M * bs, D] matrix per (head, sequence)
            qg = (q * d**-0.5).view(b, hkv, hq // hkv, d).transpose(0, 1)  # [Hkv, B, G, D]
            values = self.cache.gather(layer, "v", meta.decode_blocks).view(hkv, b, -1, d)
            if meta.cascade is not None:
                o = self._cascade(layer, qg, self._scores(qg, keys), values, rows_first=False)
            elif self.sdpa_decode:  # q is scaled already (scale=1)
                o = F.scaled_dot_product_attention(qg, keys, values, attn_mask=meta.decode_mask, scale=1.0)
            else:
                o = torch.matmul(self._scores(qg, keys).softmax(-1), values)  # [Hkv, B, G, D]
            o = o.transpose(0, 1)
        if rot is not None:
            o = o @ rot
        return o.reshape(b, hq, d)

    def _decode_buffered(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Decode rows against the decode buffer: gather only rows it does not hold yet, append every
        row's new token (k, v [B, Hkv, D]: exactly what an fp32 cache stores; other dtypes read back
        what they stored), and attend to a strided view of it in place. Returns [B, Hkv, G, D]."""
        meta, buf = self.meta, self.meta.buffer
        b, hq, d = q.shape
        kb, vb = buf.k[layer], buf.v[layer]  # [S, Hkv, C, D]
        hkv = kb.shape[1]
        stored_as_is = self.cache.k.dtype == torch.float32
        for which, dst, x in (("k", kb, k), ("v", vb, v)):
            self._refill(layer, which, dst)
            if not stored_as_is:
                x = self.cache.read(layer, which, meta.write_blocks[:b], meta.write_offsets[:b]).transpose(0, 1)
            dst[buf.rows, :, buf.last] = x
        qg = (q * d**-0.5).view(b, hkv, hq // hkv, d)  # [B, Hkv, G, D]
        keys, values = kb[:b, :, :buf.max_length], vb[:b, :, :buf.max_length]  # [B, Hkv, L, D] views
        if meta.cascade is not None:
            return self._cascade(layer, qg.transpose(0, 1), self._scores(qg, keys), values, rows_first=True)
        if self.sdpa_decode:
            return F.scaled_dot_product_attention(qg, keys, values, attn_mask=meta.decode_mask, scale=1.0)
        return torch.matmul(self._scores(qg, keys).softmax(-1), values)

    def _refill(self, layer: int, which: str, dst: torch.Tensor) -> None:
        """Rows the decode buffer does not hold yet (new, recomputed, just verified) gathered whole into
        their slots of `dst` [S, Hkv, C, D]."""
        buf = self.meta.buffer
        if buf.refill_slots.numel():
            t, hkv, d = buf.refill_tokens, dst.shape[1], dst.shape[-1]
            g = self.cache.gather(layer, which, buf.refill_blocks, "_refill")
            dst[buf.refill_slots, :, :t] = g.view(hkv, -1, t, d).transpose(0, 1)

    def _decode_native(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The decode rows through the C++ kernel: it stores their new keys and values (cache and buffer)
        and attends each to its group's shared prefix and its own keys in one pass. Returns [B, Hq, D]."""
        meta, buf, c = self.meta, self.meta.buffer, self.meta.cascade
        b, hq, d = q.shape
        kb, vb = buf.k[layer], buf.v[layer]
        self._refill(layer, "k", kb)
        self._refill(layer, "v", vb)
        kc, vc = self.cache.layer_kv(layer)
        if c is not None:
            keys_t, vals = self._prefix(layer, "k", c), self._prefix(layer, "v", c)
            prefix = (keys_t, vals.view(keys_t.shape[0], c.num_groups, -1, d), c.tokens, c.group_of_row)
        else:
            none, no_rows = q.new_empty(0), buf.lengths.new_empty(0)  # no groups
            prefix = (none, none, no_rows, no_rows)
        out = q.new_empty(b, hq, d)
        decode_attention(out, q, k, v, kb, vb, buf.lengths, kc, vc, meta.write_blocks[:b], meta.write_offsets[:b],
                         *prefix, d**-0.5)
        return out

    def _scores(self, qg: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Masked scores of (already scaled) queries [..., G, D] against keys [..., L, D]: [..., G, L]."""
        scores = torch.matmul(qg, keys.transpose(-1, -2))
        scores += self.meta.decode_mask
        return scores

    def _cascade(self, layer: int, qg: torch.Tensor, scores: torch.Tensor, values: torch.Tensor,
                 rows_first: bool) -> torch.Tensor:
        """Own-suffix attention (scores and values [Hkv, B, G, *], or [B, Hkv, G, *] if rows_first)
        merged with each group's shared-prefix attention; qg is [Hkv, B, G, D]. Same layout out.

        Every group attends to its prefix in the same few ops (groups padded to one shape), so the
        cost per layer does not grow with the number of groups."""
        c = self.meta.cascade
        hkv, _, g, d = qg.shape
        peak = scores.amax(-1, keepdim=True)  # finite: a row's own blocks hold at least its new token
        weights = scores.sub_(peak).exp_()
        total = weights.sum(-1, keepdim=True)
        out = torch.matmul(weights, values)  # unnormalised
        keys_t = self._prefix(layer, "k", c)  # [Hkv, Gr, D, P * bs]
        qs = qg.index_select(1, c.rows).view(hkv, c.num_groups, c.max_rows * g, d)
        s = torch.matmul(qs, keys_t)  # [Hkv, Gr, R * G, P * bs]
        s += c.mask
        # Each group slot's output, softmax sum and peak side by side, plus a null slot (0, 0, -inf) for
        # rows in no group: one index_select takes all three to the decode rows.
        slots = self._slots(hkv, c.num_groups * c.max_rows, g, d, s.dtype)
        grouped = slots[:, :-1].view(hkv, c.num_groups, c.max_rows * g, d + 2)
        s_peak = torch.amax(s, -1, keepdim=True, out=grouped[..., d + 1:])
        w = s.sub_(s_peak).exp_()
        torch.sum(w, -1, keepdim=True, out=grouped[..., d:d + 1])
        vals = self._prefix(layer, "v", c).view(hkv, c.num_groups, -1, d)
        torch.matmul(w, vals, out=grouped[..., :d])  # [Hkv, Gr, R * G, D]
        per_row = slots.index_select(1, c.back)  # [Hkv, B, G, D + 2]
        if rows_first:
            per_row = per_row.transpose(0, 1)
        s_out, s_total, s_peak = per_row[..., :d], per_row[..., d:d + 1], per_row[..., d + 1:]
        new_peak = torch.maximum(peak, s_peak)
        a, k = torch.exp(s_peak - new_peak), torch.exp(peak - new_peak)
        return (s_out * a + out * k) / (s_total * a + total * k)

    def _slots(self, hkv: int, n: int, g: int, d: int, dtype: torch.dtype) -> torch.Tensor:
        """The step's [Hkv, n + 1, G, D + 2] workspace of group-slot results; made (and its null slot
        filled) on the first layer, overwritten by every layer after."""
        if self._group_slots is None:
            self._group_slots = torch.empty(hkv, n + 1, g, d + 2, dtype=dtype, device=self.cache.device)
            self._group_slots[:, -1, :, :d + 1] = 0.0
            self._group_slots[:, -1, :, d + 1] = float("-inf")
        return self._group_slots

    def _prefix(self, layer: int, which: str, c: Cascade) -> torch.Tensor:
        """The groups' shared prefixes: values [Hkv, Gr * P, bs, D], keys transposed [Hkv, Gr, D, P * bs]
        (a [G, D] x [D, L] product ran ~30% faster here than against [L, D] keys, with the same sums)."""
        if c.key is None:
            got = self.cache.gather(layer, which, c.blocks, "_shared")
            return transposed_keys(got, c.num_groups) if which == "k" else got
        return self.cache.gather_prefix(layer, which, c.blocks, c.key, c.num_groups)

    def native_segment(self, seg: Segment) -> bool:
        """A segment the kernel attends: short, after cached tokens (a fresh prompt takes SDPA's causal
        kernel with no gather), no sliding window."""
        return self.kernels and seg.start > 0 and seg.length <= SEGMENT_TOKENS and not self.window

    def _segment(self, layer: int, seg: Segment, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.native_segment(seg):  # reads the cache through the block table in place
            out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
            segment_attention(out, q, *self.cache.layer_kv(layer), seg.blocks, seg.start, q.shape[-1]**-0.5)
            return out
        ctx = seg.start + seg.length
        qt = q.transpose(0, 1)[None]  # [1, Hq, T, D]
        if seg.start == 0 and not self.window and seg.length <= self.query_chunk:
            keys, values = k.transpose(0, 1)[None], v.transpose(0, 1)[None]  # nothing cached before
            o = F.scaled_dot_product_attention(qt, keys, values, is_causal=True, enable_gqa=True)
            return o[0].transpose(0, 1)
        rot = self.cache.rotation
        if rot is not None:
            qt = qt @ rot
        if seg.positions is None:
            keys, values = (self._contiguous(layer, w, seg.blocks, ctx) for w in ("k", "v"))
            kpos = torch.arange(ctx, device=q.device)
        else:  # the blocks the window still holds; keys past the context are masked as in the future
            keys, values = (self._contiguous(layer, w, seg.blocks, seg.blocks.numel() * self.cache.block_size)
                            for w in ("k", "v"))
            kpos = seg.positions
        outs = []
        for qs in range(0, seg.length, self.query_chunk):
            qe = min(qs + self.query_chunk, seg.length)
            qpos = torch.arange(seg.start + qs, seg.start + qe, device=q.device)
            mask = window_mask(qpos, kpos, self.window, self.sinks)
            outs.append(F.scaled_dot_product_attention(qt[:, :, qs:qe], keys, values, attn_mask=mask[None, None],
                                                       enable_gqa=True))
        o = torch.cat(outs, dim=2)
        return (o @ rot if rot is not None else o)[0].transpose(0, 1)

    def _contiguous(self, layer: int, which: str, blocks: torch.Tensor, ctx: int) -> torch.Tensor:
        g = self.cache.gather(layer, which, blocks)  # [Hkv, M, bs, D]
        return g.view(g.shape[0], -1, g.shape[-1])[:, :ctx][None]
