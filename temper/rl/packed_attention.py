"""Attention over packed rows: causal within each sequence, nothing across sequences.

A dense block-diagonal mask makes SDPA on CPU compute every query against every key of the row
and then throw most of it away (CPU SDPA masks skip no work). Running SDPA causally on each
segment instead does sum(n_i^2) work rather than (sum n_i)^2, which is what makes packing pay.
A shared prompt (batching.py) is one segment; each sample's rest after it attends to the prompt's
keys and its own, causally: the last n of P + n positions. On CPU that is two mask-free flash-attention calls
(all of the prompt; the rest's own keys, causal) merged by log-sum-exp: a [n, P + n] mask would cost
memory quadratic in the sample's length (SDPA keeps it, as floats, for the backward) and twice the time.
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
        if self.sliding_window is None and q.device.type == "cpu":
            # the aten op is not on autocast's list: give it the dtype SDPA would get (RoPE may leave q, k in fp32)
            dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else q.dtype
            parts = (x.transpose(1, 2).to(dtype) for x in (q[:, rest], k[:, prompt], v[:, prompt], k[:, rest],
                                                            v[:, rest]))
            return _PromptThenCausal.apply(*parts).transpose(1, 2)
        # a window, or another device's kernels: one masked call
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


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class _PromptThenCausal(torch.autograd.Function):
    """Queries q [B, H, n, D] against a prompt's keys kp/vp (all visible) then their own kr/vr (causal), in
    [B, H, T, D] layout with grouped-query heads: each part by CPU flash attention, merged by log-sum-exp. The
    backward runs each part's flash backward with the merged output and log-sum-exp, which gives that part's
    exact share of the gradients (as ring attention's blocks do)."""

    @staticmethod
    def forward(ctx, q, kp, vp, kr, vr):  # type: ignore[override]
        o1, l1 = _flash(q, kp, vp, 0.0, False)
        o2, l2 = _flash(q, kr, vr, 0.0, True)
        lse = torch.logaddexp(l1, l2)  # fp32 for bf16 inputs too; the output keeps the inputs' dtype (autocast)
        out = (o1 * torch.exp(l1 - lse)[..., None] + o2 * torch.exp(l2 - lse)[..., None]).to(q.dtype)
        ctx.save_for_backward(q, kp, vp, kr, vr, out, lse)
        return out

    @staticmethod
    def backward(ctx, dout):  # type: ignore[override]
        q, kp, vp, kr, vr, out, lse = ctx.saved_tensors
        dout = dout.to(q.dtype).contiguous()
        dq1, dkp, dvp = _flash_backward(dout, q, kp, vp, out, lse, 0.0, False)
        dq2, dkr, dvr = _flash_backward(dout, q, kr, vr, out, lse, 0.0, True)
        return dq1 + dq2, dkp, dvp, dkr, dvr
