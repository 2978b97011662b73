"""The draft model's KV cache: one contiguous, growable cache per sequence, and its attention backend.

A draft model is small and drafts a handful of tokens a step, mostly for one sequence, so
its keys and values live in plain per-sequence tensors (no blocks, no gathers): attention
reads a slice of them. Rolling back rejected drafts is setting `length`. Several sequences
run in one packed forward [1, N] (every linear layer batched); only attention loops over them.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from temper.models import ModelConfig
from temper.models.attention import causal_mask


class SequenceKV:
    """Keys and values of one sequence for every layer: [layers, 2, Hkv, capacity, D]."""

    def __init__(self, cfg: ModelConfig, capacity: int, dtype: torch.dtype, device: torch.device | str = "cpu"):
        self.kv = torch.empty(cfg.num_hidden_layers, 2, cfg.num_key_value_heads, capacity, cfg.head_dim, dtype=dtype,
                              device=device)
        self.length = 0  # positions [0, length) hold valid keys and values

    def reserve(self, length: int) -> None:
        """Room for `length` positions; grows by doubling (one copy per doubling)."""
        capacity = self.kv.shape[3]
        if length > capacity:
            grown = self.kv.new_empty(*self.kv.shape[:3], max(length, 2 * capacity), self.kv.shape[4])
            grown[:, :, :, :self.length] = self.kv[:, :, :, :self.length]
            self.kv = grown


@dataclass
class DraftSegment:
    row: int  # first row in the packed batch
    cache: SequenceKV
    start: int  # position of the segment's first token (== cache.length before the forward)
    length: int


class DraftAttention:
    """The `AttentionBackend` of one draft forward: write each segment's new K/V, attend over its cache."""

    def __init__(self, segments: list[DraftSegment], window: int | None = None):
        self.segments, self.window = segments, window

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q[0], k[0], v[0]  # [N, H, D]
        out = torch.empty_like(q)
        for seg in self.segments:
            rows = slice(seg.row, seg.row + seg.length)
            end = seg.start + seg.length
            kv = seg.cache.kv[layer]
            kv[0, :, seg.start:end] = k[rows].transpose(0, 1)
            kv[1, :, seg.start:end] = v[rows].transpose(0, 1)
            qt = q[rows].transpose(0, 1)[None]  # [1, Hq, T, D]
            keys, values = kv[0, :, :end][None], kv[1, :, :end][None]
            if self.window is None and (seg.start == 0 or seg.length == 1):
                # Whole-prefix causal (no mask to build), or one query that sees every key.
                o = F.scaled_dot_product_attention(qt, keys, values, is_causal=seg.start == 0 and seg.length > 1,
                                                   enable_gqa=True)
            else:
                mask = causal_mask(seg.length, end, q.device, self.window)
                o = F.scaled_dot_product_attention(qt, keys, values, attn_mask=mask[None, None], enable_gqa=True)
            out[rows] = o[0].transpose(0, 1)
        return out[None]
