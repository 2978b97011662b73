"""Attention backends: how a layer's queries meet the keys and values.

The model computes q, k, v (after RoPE) and hands them to a backend, so one model
implementation serves training (dense causal, padded or packed batches) and the rollout
engine (paged KV cache, which supplies its own backend). Shapes: q [B, T, Hq, D],
k and v [B, T, Hkv, D]; the result is [B, T, Hq, D].
"""

from typing import Protocol

import torch
import torch.nn.functional as F


class AttentionBackend(Protocol):
    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """Scaled dot-product attention in [B, T, H, D] layout with grouped-query heads."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    enable_gqa = q.shape[1] != k.shape[1]
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal and mask is None, enable_gqa=enable_gqa
    )
    return out.transpose(1, 2)


def causal_mask(
    t_q: int, t_k: int, device: torch.device, sliding_window: int | None = None, offset: int | None = None
) -> torch.Tensor:
    """Boolean [t_q, t_k] mask, True where attention is allowed; queries are the last t_q of t_k keys."""
    offset = t_k - t_q if offset is None else offset
    qpos = torch.arange(t_q, device=device)[:, None] + offset
    kpos = torch.arange(t_k, device=device)[None, :]
    allowed = kpos <= qpos
    if sliding_window is not None:
        allowed &= kpos > qpos - sliding_window
    return allowed


class CausalAttention:
    """Dense causal attention over whole sequences, optionally with padding and a sliding window.

    `padding_mask` [B, T] marks real tokens with 1. Padded query rows would see no key at all
    (NaN in softmax), so every position may always attend to itself.
    """

    def __init__(self, padding_mask: torch.Tensor | None = None, sliding_window: int | None = None):
        self.padding_mask = padding_mask
        self.sliding_window = sliding_window
        self._mask: torch.Tensor | None = None

    def mask(self, t: int, device: torch.device) -> torch.Tensor | None:
        if self.padding_mask is None and self.sliding_window is None:
            return None
        if self._mask is None or self._mask.shape[-1] != t:
            allowed = causal_mask(t, t, device, self.sliding_window)[None, None]
            if self.padding_mask is not None:
                keys = self.padding_mask.bool()[:, None, None, :]
                allowed = (allowed & keys) | torch.eye(t, dtype=torch.bool, device=device)
            self._mask = allowed
        return self._mask

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sdpa(q, k, v, self.mask(q.shape[1], q.device), causal=True)
