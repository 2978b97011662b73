"""The engine's attention backend: writes new keys/values into the paged cache, then attends.

One forward runs all scheduled tokens packed as [1, N]: first the decoding sequences (one
token each), then the segments (prefill chunks, speculative verification) of the others.
Decode rows attend in one batched pass: their blocks are gathered once per layer, head-major,
so each (kv head, sequence) is one matmul for all the query heads of its group. Decode rows whose
tables start with the same cached blocks (the n samples of one prompt) attend to that shared
prefix together (cascade attention): its blocks are gathered once for the group, not once per
row, and the two partial softmaxes (shared prefix, own suffix) are merged by their maxima and
sums, as in flash-decoding. Segments attend
per sequence with SDPA in query chunks, so no [T, T] score matrix is ever built, however long
the prompt.
"""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from temper.engine.kv_cache import KVCache


@dataclass
class Segment:
    row: int  # first row of the segment in the packed batch
    start: int  # position of its first token (tokens before it are in the cache)
    length: int
    blocks: torch.Tensor  # [M] block ids covering [0, start + length)


@dataclass
class StepMeta:
    write_blocks: torch.Tensor  # [N] block id for each new token
    write_offsets: torch.Tensor  # [N] offset within the block
    num_decode: int = 0
    decode_blocks: torch.Tensor | None = None  # [Bd * M] block ids, padded rows masked
    decode_mask: torch.Tensor | None = None  # [1, Bd, 1, M * block_size] additive (0 / -inf)
    decode_max_blocks: int = 0
    # Cascade attention: (decode rows, the prefix blocks they share); decode_blocks/decode_mask
    # then cover only each row's own blocks after its group's shared prefix.
    shared: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)


def window_mask(qpos: torch.Tensor, kpos: torch.Tensor, window: int, sinks: int) -> torch.Tensor:
    """True where query position may see key position (causal, optional sliding window + sinks)."""
    allowed = kpos[None, :] <= qpos[:, None]
    if window:
        allowed &= (kpos[None, :] > qpos[:, None] - window) | (kpos[None, :] < sinks)
    return allowed


class PagedAttention:
    def __init__(self, cache: KVCache, meta: StepMeta, query_chunk: int = 512, window: int = 0, sinks: int = 0):
        self.cache, self.meta, self.query_chunk = cache, meta, query_chunk
        self.window, self.sinks = window, sinks

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        meta, cache = self.meta, self.cache
        q, k, v = q[0], k[0], v[0]  # [N, H, D]
        cache.write(layer, meta.write_blocks, meta.write_offsets, k, v)
        out = torch.empty_like(q)
        nd = meta.num_decode
        if nd:
            out[:nd] = self._decode(layer, q[:nd])
        for seg in meta.segments:
            rows = slice(seg.row, seg.row + seg.length)
            out[rows] = self._segment(layer, seg, q[rows], k[rows], v[rows])
        return out[None]

    def _decode(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        meta = self.meta
        b, hq, d = q.shape
        keys = self.cache.gather(layer, "k", meta.decode_blocks)  # [Hkv, B * M, bs, D]
        hkv = keys.shape[0]
        keys = keys.view(hkv, b, -1, d)  # one [M * bs, D] matrix per (head, sequence)
        rot = self.cache.rotation  # int8 blocks hold rotated keys and values
        if rot is not None:
            q = q @ rot
        qg = (q * d**-0.5).view(b, hkv, hq // hkv, d).transpose(0, 1)  # [Hkv, B, G, D]
        scores = torch.matmul(qg, keys.transpose(-1, -2))  # [Hkv, B, G, M * bs]
        scores += meta.decode_mask
        values = self.cache.gather(layer, "v", meta.decode_blocks).view(hkv, b, -1, d)
        if meta.shared:
            o = self._cascade(layer, qg, scores, values)
        else:
            o = torch.matmul(scores.softmax(-1), values)  # [Hkv, B, G, D]
        if rot is not None:
            o = o @ rot
        return o.transpose(0, 1).reshape(b, hq, d)

    def _cascade(self, layer: int, qg: torch.Tensor, scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Own-suffix scores [Hkv, B, G, M * bs] merged with each group's shared-prefix attention."""
        hkv, _, g, d = qg.shape
        peak = scores.amax(-1, keepdim=True)  # finite: a row's own blocks hold at least its new token
        weights = torch.exp(scores - peak)
        total = weights.sum(-1, keepdim=True)
        out = torch.matmul(weights, values)  # unnormalised, [Hkv, B, G, D]
        for rows, blocks in self.meta.shared:
            r = rows.numel()
            keys = self.cache.gather(layer, "k", blocks, "_shared").view(hkv, -1, d)  # [Hkv, P * bs, D]
            s = torch.matmul(qg[:, rows].reshape(hkv, r * g, d), keys.transpose(-1, -2))
            s_peak = s.amax(-1, keepdim=True)
            w = torch.exp(s - s_peak)
            vals = self.cache.gather(layer, "v", blocks, "_shared").view(hkv, -1, d)
            s_out, s_total = torch.matmul(w, vals).view(hkv, r, g, d), w.sum(-1, keepdim=True).view(hkv, r, g, 1)
            s_peak = s_peak.view(hkv, r, g, 1)
            new_peak = torch.maximum(peak[:, rows], s_peak)
            a, c = torch.exp(s_peak - new_peak), torch.exp(peak[:, rows] - new_peak)
            out[:, rows] = s_out * a + out[:, rows] * c
            total[:, rows] = s_total * a + total[:, rows] * c
        return out / total

    def _segment(self, layer: int, seg: Segment, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        ctx = seg.start + seg.length
        qt = q.transpose(0, 1)[None]  # [1, Hq, T, D]
        if seg.start == 0 and not self.window and seg.length <= self.query_chunk:
            keys, values = k.transpose(0, 1)[None], v.transpose(0, 1)[None]  # nothing cached before
            o = F.scaled_dot_product_attention(qt, keys, values, is_causal=True, enable_gqa=True)
            return o[0].transpose(0, 1)
        rot = self.cache.rotation
        if rot is not None:
            qt = qt @ rot
        keys, values = (self._contiguous(layer, w, seg.blocks, ctx) for w in ("k", "v"))
        kpos = torch.arange(ctx)
        outs = []
        for qs in range(0, seg.length, self.query_chunk):
            qe = min(qs + self.query_chunk, seg.length)
            mask = window_mask(torch.arange(seg.start + qs, seg.start + qe), kpos, self.window, self.sinks)
            outs.append(F.scaled_dot_product_attention(qt[:, :, qs:qe], keys, values, attn_mask=mask[None, None],
                                                       enable_gqa=True))
        o = torch.cat(outs, dim=2)
        return (o @ rot if rot is not None else o)[0].transpose(0, 1)

    def _contiguous(self, layer: int, which: str, blocks: torch.Tensor, ctx: int) -> torch.Tensor:
        g = self.cache.gather(layer, which, blocks)  # [Hkv, M, bs, D]
        return g.view(g.shape[0], -1, g.shape[-1])[:, :ctx][None]
