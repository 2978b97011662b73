"""Rotary position embeddings with the scaling variants found in real configs.

Each variant only changes the inverse frequencies (and, for YaRN, a scale on cos/sin); the
formulas follow the papers and match transformers' `modeling_rope_utils` to fp32 precision.
"""

import math

import torch

from temper.models.config import ModelConfig


def inverse_frequencies(cfg: ModelConfig, seq_len: int | None = None,
                        device: torch.device | None = None) -> tuple[torch.Tensor, float]:
    """Return (inv_freq of shape [head_dim/2] on `device`, attention scale applied to cos and sin).
    device None: torch's default (the module's construction device; `model.to` moves the buffer)."""
    dim, base, p = cfg.head_dim, cfg.rope_theta, cfg.rope_scaling or {}
    rope_type = cfg.rope_type
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    if rope_type == "default":
        return 1.0 / base**exponents, 1.0
    if rope_type == "linear":
        return 1.0 / base**exponents / p["factor"], 1.0
    if rope_type == "dynamic":
        # NTK-aware: grow the base once the sequence is longer than the trained length.
        max_pos = cfg.max_position_embeddings
        length = max(seq_len or max_pos, max_pos)
        factor = p["factor"]
        base = base * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / base**exponents, 1.0
    if rope_type == "llama3":
        return _llama3(1.0 / base**exponents, p, cfg.max_position_embeddings), 1.0
    if rope_type == "yarn":
        return _yarn(cfg, p, device)
    raise ValueError(f"unknown rope type {rope_type!r}")


def _llama3(inv_freq: torch.Tensor, p: dict, max_pos: int) -> torch.Tensor:
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old_len = p.get("original_max_position_embeddings", max_pos)
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _yarn(cfg: ModelConfig, p: dict, device: torch.device | None) -> tuple[torch.Tensor, float]:
    dim, base = cfg.head_dim, cfg.rope_theta
    original = p.get("original_max_position_embeddings", cfg.max_position_embeddings)
    factor = p.get("factor") or cfg.max_position_embeddings / original

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        if p.get("mscale") and p.get("mscale_all_dim"):
            attention_factor = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
        else:
            attention_factor = mscale(factor)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(p.get("beta_fast") or 32), correction_dim(p.get("beta_slow") or 1)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32, device=device) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, device=device).float() / dim)
    extrapolation = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, float(attention_factor)


class RotaryEmbedding(torch.nn.Module):
    """Computes cos/sin for given positions; the frequencies are fixed except for dynamic NTK."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        inv_freq, self.scale = inverse_frequencies(cfg)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [..., T] -> (cos, signed sin), each [..., T, 1, D] (broadcast over heads): the sin's
        first half negated, which `apply_rotary` needs (computed once per forward, not per layer)."""
        inv_freq = self.inv_freq
        if self.cfg.rope_type == "dynamic":
            seq_len = int(positions.max()) + 1  # a host sync, for dynamic NTK only
            if seq_len > self.cfg.max_position_embeddings:
                inv_freq, _ = inverse_frequencies(self.cfg, seq_len, positions.device)
        freqs = positions[..., None].float() * inv_freq
        cos, sin = (freqs.cos() * self.scale).to(dtype), (freqs.sin() * self.scale).to(dtype)
        return torch.cat((cos, cos), dim=-1).unsqueeze(-2), torch.cat((-sin, sin), dim=-1).unsqueeze(-2)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x: [..., T, H, D]; cos, signed_sin from `RotaryEmbedding`. The rotation x * cos + (-x2, x1) * sin
    as x * cos + (x2, x1) * (-sin1, sin2), bit for bit (negation is exact), in four ops instead of eight."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * signed_sin
