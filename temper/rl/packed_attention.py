"""Attention over packed rows: causal within each sequence, nothing across sequences.

A dense block-diagonal mask makes SDPA on CPU compute every query against every key of the row
and then throw most of it away (CPU SDPA masks skip no work). Running SDPA causally on each
segment instead does sum(n_i^2) work rather than (sum n_i)^2, which is what makes packing pay.
"""

import torch

from temper.models.attention import causal_mask, sdpa


class SegmentAttention:
    """`segments[b]` lists the lengths of the sequences packed into row b (a trailing pad is one more)."""

    def __init__(self, segments: list[list[int]], sliding_window: int | None = None):
        self.segments = segments
        self.sliding_window = sliding_window

    def _one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.sliding_window is not None and q.shape[1] > self.sliding_window:
            mask = causal_mask(q.shape[1], q.shape[1], q.device, self.sliding_window)
        return sdpa(q, k, v, mask, causal=True)

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if all(len(seg) == 1 for seg in self.segments):
            return self._one(q, k, v)
        rows = []
        for b, seg in enumerate(self.segments):
            parts, start = [], 0
            for n in seg:
                sl = slice(start, start + n)
                parts.append(self._one(q[b:b + 1, sl], k[b:b + 1, sl], v[b:b + 1, sl]))
                start += n
            rows.append(torch.cat(parts, dim=1))
        return torch.cat(rows, dim=0)
