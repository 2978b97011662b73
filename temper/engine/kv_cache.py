"""The paged KV cache: per layer and kv head, [num_blocks, block_size, head_dim] for keys and values.

Head-major storage makes a gather (per head, along the block axis: the fast, contiguous
index_select) produce one contiguous [blocks * block_size, head_dim] matrix per head and
sequence, so attention multiplies against it without another copy. Gathers go into
preallocated workspaces: fresh multi-megabyte allocations on every layer cost more than
the copy itself (page faults). int8 stores one fp32 scale per token and head (absmax / 127),
after an orthonormal Hadamard rotation of each head (as in QuaRot): keys carry a few outlier
channels that would otherwise take the whole int8 range. Attention is unchanged if queries
get the same rotation (q.Hk = Hq.k) and outputs the inverse one (H is its own inverse).
int4 stores rotated 4-bit levels, two channels to a byte (channel 2j in the low nibble, 2j + 1 in the
high one). Values: levels -7..7 (offset by 8) with one fp16 scale (absmax / 7) per token, head and group
of INT4_GROUP channels. Keys: levels 0..15 with each channel's fp16 step and minimum over the block's
tokens (as KIVI: a channel's range is steadier across tokens than a token's across channels), so a
block's keys are quantized once it is full; until then its keys and values are also kept in fp32
(open_blocks.py) and read exactly. 32 + 4 bytes per head and token for each, against fp32's 256, at 64-token blocks.
"""

import torch

from temper.engine.lazy_memory import lazy_zeros
from temper.engine.open_blocks import OpenBlocks
from temper.models import ModelConfig


def hadamard(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Orthonormal, symmetric Sylvester-Hadamard matrix (n a power of two), or identity otherwise."""
    if n & (n - 1):
        return torch.eye(n, device=device)
    h = torch.ones(1, 1, device=device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / n**0.5


def select_blocks(src: torch.Tensor, blocks: torch.Tensor, out: torch.Tensor, per_head: bool) -> None:
    """out[h] = src[h][blocks] for every head h. Per head on the CPU (index_select along a non-leading
    axis is ~50x slower there); elsewhere one kernel for all heads."""
    if per_head:
        for h in range(src.shape[0]):
            torch.index_select(src[h], 0, blocks, out=out[h])
    else:
        torch.index_select(src, 1, blocks, out=out)


def transposed_keys(gathered: torch.Tensor, groups: int) -> torch.Tensor:
    """Gathered keys [Hkv, Gr * P, bs, D] of `groups` prefixes as one [D, P * bs] matrix per head and
    prefix: [Hkv, Gr, D, P * bs]."""
    hkv, d = gathered.shape[0], gathered.shape[-1]
    return gathered.view(hkv, groups, -1, d).transpose(-1, -2).contiguous()


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8, "int4": torch.uint8}
INT4_GROUP = 32  # channels per int4 scale


def int4_groups(head_dim: int) -> int:
    return max(1, head_dim // INT4_GROUP) if head_dim % INT4_GROUP == 0 else 1


def stored_dim(head_dim: int, kv_dtype: str) -> int:
    """Elements per head and token in the cache's last axis (int4: two channels to a byte)."""
    return head_dim // 2 if kv_dtype == "int4" else head_dim


def scale_shape(head_dim: int, kv_dtype: str) -> tuple[int, torch.dtype] | None:
    """The scales kept per token and head: (how many, their dtype); None for an unquantized cache."""
    return {"int8": (1, torch.float32), "int4": (int4_groups(head_dim), torch.float16)}.get(kv_dtype)


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str, block_size: int = 64) -> int:
    """Bytes of keys and values per token (int4: its keys' per-channel step and minimum per block spread over
    the block's tokens, rounded up)."""
    per_head = stored_dim(cfg.head_dim, kv_dtype) * DTYPES[kv_dtype].itemsize
    values = per_head
    if (scales := scale_shape(cfg.head_dim, kv_dtype)) is not None:
        values += scales[0] * scales[1].itemsize
    keys = per_head + -(-2 * cfg.head_dim * 2 // block_size) if kv_dtype == "int4" else values
    return cfg.num_hidden_layers * cfg.num_key_value_heads * (keys + values)


def pack_nibbles(levels: torch.Tensor) -> torch.Tensor:
    """uint8 levels 0..15 [..., D] -> [..., D / 2]: channel 2j in the low nibble, 2j + 1 in the high one."""
    return levels[..., 0::2] | (levels[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """`pack_nibbles` undone: uint8 [..., D / 2] -> levels 0..15 [..., D]."""
    return torch.stack([packed & 15, packed >> 4], dim=-1).flatten(-2)


def quantize_int4(x: torch.Tensor, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (packed uint8 [..., D / 2], fp16 scales [..., groups])."""
    g = x.float().unflatten(-1, (groups, -1))
    scale = (g.abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / 7.0).half()
    levels = (torch.round(g / scale.float()).clamp_(-7, 7) + 8).to(torch.uint8).flatten(-2)
    return pack_nibbles(levels), scale.squeeze(-1)


def quantize_int4_channels(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole blocks x [..., T, D] -> (levels 0..15 packed [..., T, D / 2], fp16 [..., 2, D]: each channel's step
    and minimum over the T tokens)."""
    lo, hi = x.amin(-2, keepdim=True), x.amax(-2, keepdim=True)
    step, lo = ((hi - lo).clamp_min(1e-8) / 15.0).half(), lo.half()
    levels = torch.round((x - lo.float()) / step.float()).clamp_(0, 15).to(torch.uint8)
    return pack_nibbles(levels), torch.cat([step, lo], dim=-2)


def dequantize_int4_channels(packed: torch.Tensor, params: torch.Tensor,
                             out: torch.Tensor | None = None) -> torch.Tensor:
    """packed uint8 [..., T, D / 2] and params fp16 [..., 2, D] -> fp32 [..., T, D] (into `out` if given)."""
    levels = unpack_nibbles(packed)
    out = levels.float() if out is None else out.copy_(levels)
    return out.mul_(params[..., 0:1, :].float()).add_(params[..., 1:2, :].float())


def dequantize_int4(packed: torch.Tensor, scales: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """packed uint8 [..., D / 2] and fp16 scales [..., groups] -> fp32 [..., D] (into `out` if given)."""
    levels = unpack_nibbles(packed).float() - 8.0
    x = levels.unflatten(-1, (scales.shape[-1], -1)) * scales.float()[..., None]
    return x.flatten(-2) if out is None else out.copy_(x.flatten(-2))


class KVCache:
    def __init__(self, cfg: ModelConfig, num_blocks: int, block_size: int, kv_dtype: str,
                 device: torch.device | str = "cpu"):
        """`device`: the model's (the engine passes its parameters' device)."""
        self.kv_dtype, self.block_size, self.num_blocks = kv_dtype, block_size, num_blocks
        self.device = device = torch.device(device)
        self.quantized = kv_dtype in ("int8", "int4")
        self.head_dim = cfg.head_dim
        shape = (cfg.num_hidden_layers, cfg.num_key_value_heads, num_blocks, block_size,
                 stored_dim(cfg.head_dim, kv_dtype))
        self.k, self.v = (lazy_zeros(shape, DTYPES[kv_dtype], device) for _ in "kv")
        self._layer_kv = list(zip(self.k.unbind(0), self.v.unbind(0), strict=True))  # views, made once
        if (scales := scale_shape(cfg.head_dim, kv_dtype)) is not None:
            self.v_scale = lazy_zeros((*shape[:-1], scales[0]), scales[1], device)
            # int4 keys: a step and a minimum per channel and block (kept in fp32 until full: open_blocks.py)
            self.k_scale = lazy_zeros((*shape[:3], 2, cfg.head_dim), torch.float16, device) if kv_dtype == "int4" \
                else lazy_zeros((*shape[:-1], scales[0]), scales[1], device)
        self.rotation = hadamard(cfg.head_dim, device) if self.quantized else None
        self.open: OpenBlocks | None = None
        if kv_dtype == "int4":
            self.open = OpenBlocks(cfg.num_hidden_layers, cfg.num_key_value_heads, num_blocks, block_size,
                                   cfg.head_dim, device, self._close_keys, self._load_rows)
        self._ws: dict[str, torch.Tensor] = {}
        self._prefix_key: tuple | None = None  # the shared prefixes whose gathers are kept
        self._prefix_kept: set[tuple[int, str]] = set()  # (layer, k|v) gathered for that key
        self.prefix_reuses = 0  # gathers of shared prefixes served from the kept copy

    def layer_kv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's keys and values [Hkv, blocks, block_size, D], as views."""
        return self._layer_kv[layer]

    @property
    def nbytes(self) -> int:
        total = self.k.nbytes + self.v.nbytes
        return total + (self.k_scale.nbytes + self.v_scale.nbytes if self.quantized else 0)

    def workspace(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        n = 1
        for s in shape:
            n *= s
        buf = self._ws.get(name)
        if buf is None or buf.numel() < n or buf.dtype != dtype:
            buf = self._ws[name] = torch.empty(max(n, 1), dtype=dtype, device=self.device)
        return buf[:n].view(shape)

    def gather_prefix(self, layer: int, which: str, blocks: torch.Tensor, key: tuple, groups: int) -> torch.Tensor:
        """gather() of blocks whose KV cannot change while `key` stays the same (a cascade's shared
        prefixes: full blocks, held by live sequences, named with their generations), kept per layer
        in a workspace of its own and reused by the steps after. Keys are kept as `transposed_keys`
        of the `groups` prefixes, values as gathered."""
        if key != self._prefix_key:
            self._prefix_key, self._prefix_kept = key, set()
        slot = f"_prefix{layer}"
        _, hkv, _, bs, _ = self.k.shape
        d = self.head_dim
        shape = (hkv, groups, d, blocks.numel() // groups * bs) if which == "k" else (hkv, blocks.numel(), bs, d)
        kept = self.workspace(which + slot, shape, torch.float32)
        if (layer, which) in self._prefix_kept:
            self.prefix_reuses += 1
            return kept
        self._prefix_kept.add((layer, which))
        got = self.gather(layer, which, blocks, "_shared")  # its int8/bf16 scratch is not kept per layer
        return kept.copy_(transposed_keys(got, groups) if which == "k" else got)

    def prefix_bytes(self, num_blocks: int) -> int:
        """What keeping `num_blocks` gathered for every layer (keys and values, fp32) takes."""
        _, hkv, _, bs, _ = self.k.shape
        return 2 * self.k.shape[0] * hkv * num_blocks * bs * self.head_dim * 4

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated x [..., D] -> (what the cache stores, its scales)."""
        if self.kv_dtype == "int4":
            return quantize_int4(x, self.v_scale.shape[-1])
        scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / 127.0
        return torch.round(x / scale).clamp_(-127, 127).to(torch.int8), scale

    def dequantize(self, raw: torch.Tensor, scales: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """What `quantize` stored -> fp32 [..., D] (into `out` if given)."""
        if self.kv_dtype == "int4":
            return dequantize_int4(raw, scales, out)
        return torch.mul(raw, scales, out=out) if out is not None else raw.float() * scales

    def plan_writes(self, blocks: list[int], positions: list[int]) -> None:
        """The step's written rows (block id and position of each new token), before its forward."""
        if self.open is not None:
            self.open.plan(blocks, positions)

    def write(self, layer: int, blocks: torch.Tensor, offsets: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor) -> None:
        """Store k, v [N, kv_heads, head_dim] at (block, offset) pairs."""
        if not self.quantized:  # the hot path, once per layer and step: as few ops as it takes
            ks, vs = self._layer_kv[layer]
            if k.dtype != ks.dtype:  # index_put does not cast
                k, v = k.to(ks.dtype), v.to(ks.dtype)
            ks[:, blocks, offsets] = k.transpose(0, 1)
            vs[:, blocks, offsets] = v.transpose(0, 1)
            return
        k, v = k.float() @ self.rotation, v.float() @ self.rotation
        pairs = [(self.k, k, "k_scale"), (self.v, v, "v_scale")]
        if self.open is not None:  # int4: both kept in fp32 until their block is full, when the keys are quantized
            self.open.write(layer, offsets, k, v)
            pairs = pairs[1:]
        for cache, x, scales in pairs:
            x, s = self.quantize(x)
            getattr(self, scales)[layer][:, blocks, offsets] = s.transpose(0, 1)
            cache[layer][:, blocks, offsets] = x.transpose(0, 1).to(cache.dtype)

    def _close_keys(self, layer: int | None, blocks: torch.Tensor, slots: torch.Tensor) -> None:
        """int4: the fp32 keys in open-block `slots` quantized per channel into `blocks` (one layer, or all)."""
        if layer is None:
            packed, params = quantize_int4_channels(self.open.rows[0][:, :, slots])
            self.k[:, :, blocks], self.k_scale[:, :, blocks] = packed, params
        else:
            packed, params = quantize_int4_channels(self.open.rows[0, layer][:, slots])
            self.k[layer][:, blocks], self.k_scale[layer][:, blocks] = packed, params

    def _load_rows(self, blocks: torch.Tensor) -> torch.Tensor:
        """int4: the keys and values of `blocks` as stored, fp32 [2, layers, Hkv, n, block_size, D]."""
        return torch.stack([dequantize_int4_channels(self.k[:, :, blocks], self.k_scale[:, :, blocks]),
                            dequantize_int4(self.v[:, :, blocks], self.v_scale[:, :, blocks])])

    def read(self, layer: int, which: str, blocks: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """The stored keys or values at (block, offset) pairs as fp32 [kv_heads, N, head_dim], dequantized
        exactly as `gather` does."""
        x = (self.k if which == "k" else self.v)[layer][:, blocks, offsets]
        if which == "k" and self.open is not None:
            got = dequantize_int4_channels(x[:, :, None], self.k_scale[layer][:, blocks])[:, :, 0]
        elif self.quantized:
            got = self.dequantize(x, getattr(self, which + "_scale")[layer][:, blocks, offsets])
        else:
            return x.float()
        if self.open is not None:
            self.open.patch_rows(which, layer, blocks, offsets, got)
        return got

    def copy_block(self, src: int, dst: int) -> None:
        """Copy one block's keys and values (every layer and head) into another block."""
        for t in (self.k, self.v, *((self.k_scale, self.v_scale) if self.quantized else ())):
            t[:, :, dst] = t[:, :, src]
        if self.open is not None:
            self.open.copy(src, dst)

    def gather(self, layer: int, which: str, blocks: torch.Tensor, slot: str = "") -> torch.Tensor:
        """Blocks [M] -> fp32 [kv_heads, M, block_size, head_dim], in a reused workspace (one per
        `which` + `slot`: gathers alive at the same time need different slots).

        Each head's keys of a sequence come out as one contiguous [M * block_size, head_dim] matrix,
        so attention is one matmul per (head, sequence) rather than one per block."""
        cache = (self.k if which == "k" else self.v)[layer]  # [Hkv, nb, bs, D] (int4: D / 2 bytes)
        stored = (cache.shape[0], blocks.numel(), *cache.shape[2:])
        shape = (*stored[:-1], self.head_dim)
        which_slot = which + slot
        out = self.workspace(which_slot, shape, torch.float32)
        raw = out if cache.dtype == torch.float32 else self.workspace(which_slot + "_raw", stored, cache.dtype)
        per_head = self.device.type == "cpu"
        select_blocks(cache, blocks, raw, per_head)
        if cache.dtype == torch.float32:
            return out
        if not self.quantized:
            return out.copy_(raw)
        scales = getattr(self, which + "_scale")[layer]
        s = self.workspace(which_slot + "_s", (*stored[:2], *scales.shape[2:]), scales.dtype)
        select_blocks(scales, blocks, s, per_head)
        if self.open is None:
            return self.dequantize(raw, s, out)
        if which == "k":
            dequantize_int4_channels(raw, s, out)
        else:
            self.dequantize(raw, s, out)
        self.open.patch(which, layer, blocks, out)
        return out
