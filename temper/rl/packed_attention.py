"""Attention over packed rows: causal within each sequence, nothing across sequences.

A dense block-diagonal mask makes SDPA on CPU compute every query against every key of the row
and then throw most of it away (CPU SDPA masks skip no work). Running SDPA causally on each
segment instead does sum(n_i^2) work rather than (sum n_i)^2, which is what makes packing pay.
A shared prompt (batching.py) is one segment; each sample's rest after it attends to the prompt's
keys and its own, causally: the last n of P + n positions.
"""

import torch

from temper.models.attention import causal_mask, sdpa


class SegmentAttention:
    """`segments[b]` lists the sequences packed into row b: a length, or (a shared prompt's length, the lengths
    of the rests that follow it); a trailing pad is one more length."""

    def __init__(self, segments: list[list[int | tuple[int, tuple[int, ...]]]], sliding_window: int | None = None):
        self.segments = segments
        self.sliding_window = sliding_window

    def _one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.sliding_window is not None and q.shape[1] > self.sliding_window:
            mask = causal_mask(q.shape[1], q.shape[1], q.device, self.sliding_window)
        return sdpa(q, k, v, mask, causal=True)

    def _rest(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, prompt: slice, rest: slice) -> torch.Tensor:
        """A rest's queries against its prompt's keys and its own: causal over the last n of P + n positions."""
        keys, vals = torch.cat([k[:, prompt], k[:, rest]], dim=1), torch.cat([v[:, prompt], v[:, rest]], dim=1)
        mask = causal_mask(rest.stop - rest.start, keys.shape[1], q.device, self.sliding_window)
        return sdpa(q[:, rest], keys, vals, mask, causal=True)

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if all(len(seg) == 1 and isinstance(seg[0], int) for seg in self.segments):
            return self._one(q, k, v)
        rows = []
        for b, seg in enumerate(self.segments):
            qb, kb, vb = q[b:b + 1], k[b:b + 1], v[b:b + 1]
            parts, start = [], 0
            for entry in seg:
                n, rests = (entry, ()) if isinstance(entry, int) else entry
                prompt = slice(start, start + n)
                parts.append(self._one(qb[:, prompt], kb[:, prompt], vb[:, prompt]))
                start += n
                for r in rests:
                    parts.append(self._rest(qb, kb, vb, prompt, slice(start, start + r)))
                    start += r
            rows.append(torch.cat(parts, dim=1))
        return torch.cat(rows, dim=0)
