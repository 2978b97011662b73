"""The Llama-family decoder: Llama 2/3, Mistral, Qwen2/2.5, Qwen3 and SmolLM2 in one module.

Read top to bottom: RMSNorm, attention (grouped-query, optional bias and q/k norm), SwiGLU
MLP, the decoder layer, the model. Parameter names equal transformers' so checkpoints load
without renaming. The attention itself is a pluggable backend (see `attention.py`).

`fuse_projections()` (the rollout engine calls it) makes q/k/v_proj's weights views of one
[q; k; v] matrix and gate/up_proj's of one [gate; up] matrix, so that inference runs one GEMM where
there were three and two; the parameters stay the same objects (optimizers and in-place weight
loads keep working, and write through to the fused matrix). Training (grad enabled) runs the
separate projections, so gradients land on the parameters as before.
"""

import torch
import torch.nn.functional as F
from torch import nn

from temper.models.attention import AttentionBackend, CausalAttention
from temper.models.config import ModelConfig
from temper.models.rope import RotaryEmbedding, apply_rotary


class FusedLinear:
    """One or more nn.Linear of the same input as one GEMM at inference. Several: their weights (and
    biases) become row blocks of one matrix, the same Parameter objects re-pointed at it, and the
    output is split back. `pack`: the matrix is also kept in MKL's packed GEMM layout (1.3-2x faster
    at 16-64 rows here; one more copy of the weights), repacked whenever a weight changed in place
    (each Parameter keeps its own version counter, bumped by every in-place write to it)."""

    PACK_ROWS = 64  # the row count MKL's packing is tuned for (any count runs on it)
    # Rows for which the packed GEMM is used: one row is a matrix-vector product (memory-bound, and
    # plain sgemv was as fast), long prefill chunks ran faster on plain sgemm (measured, 2 threads).
    PACKED_ROWS = range(2, 257)

    def __init__(self, linears: list[nn.Linear], pack: bool = False):
        self.linears, self.sizes = linears, [lin.out_features for lin in linears]
        if len(linears) == 1:
            self.weight, self.bias = linears[0].weight, linears[0].bias
        else:
            with torch.no_grad():
                self.weight = torch.cat([lin.weight for lin in linears])
                self.bias = torch.cat([lin.bias for lin in linears]) if linears[0].bias is not None else None
                for lin, w in zip(linears, self.weight.split(self.sizes), strict=True):
                    lin.weight.data = w
                if self.bias is not None:
                    for lin, b in zip(linears, self.bias.split(self.sizes), strict=True):
                        lin.bias.data = b
        self.ptrs = self._ptrs()
        self.pack = pack and packable(self.weight)
        self._packed: torch.Tensor | None = None
        self._packed_version = -1

    def __reduce__(self):
        """A copied or pickled model gets no fused view (its parameters are new tensors, and MKL's packed
        layout cannot be copied): it runs the separate projections until fused again."""
        return _no_fusion, ()

    def _ptrs(self) -> list[int]:
        return [lin.weight.data_ptr() for lin in self.linears] + \
            ([lin.bias.data_ptr() for lin in self.linears] if self.bias is not None else [])

    def usable(self) -> bool:
        """Inference on still-shared storage (`.to()`, FSDP or a reassigned `.data` would have moved a
        weight off the fused matrix: then the separate projections run)."""
        return not torch.is_grad_enabled() and self._ptrs() == self.ptrs

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.matmul(x)
        return y.split(self.sizes, dim=-1) if len(self.sizes) > 1 else (y,)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """All the projections' outputs side by side, [..., sum(sizes)]."""
        if self.pack and x.numel() // x.shape[-1] in self.PACKED_ROWS:
            w = self.weight
            version = sum(lin.weight._version for lin in self.linears) + w._version
            if self._packed_version != version:
                self._packed = torch.ops.mkl._mkl_reorder_linear_weight(w.detach(), self.PACK_ROWS)
                self._packed_version = version
            rows = x.reshape(-1, x.shape[-1])  # its row count must be the call's (else MKL falls back to mm)
            y = torch.ops.mkl._mkl_linear(rows, self._packed, w, self.bias, rows.shape[0])
            y = y.view(*x.shape[:-1], y.shape[-1])
        else:
            y = F.linear(x, self.weight, self.bias)
        return y


def _no_fusion() -> None:
    return None


def packable(w: torch.Tensor) -> bool:
    return w.device.type == "cpu" and w.dtype == torch.float32 and torch.backends.mkl.is_available()


def runs_fused(fused: FusedLinear | None, linears: tuple[nn.Linear, ...]) -> bool:
    """Fused, usable, and still over these very projections (one swapped since, e.g. for a LoRA
    wrapper, would be skipped by the fused matrix)."""
    return fused is not None and fused.usable() and all(a is b for a, b in zip(fused.linears, linears, strict=True))


def project(fused: FusedLinear | None, linears: tuple[nn.Linear, ...], x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The linears' outputs: one fused GEMM when `runs_fused`, else one call each."""
    if runs_fused(fused, linears):
        return fused(x)
    return tuple(lin(x) for lin in linears)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused op, bit-identical to the lines below in fp32
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)
        if cfg.qk_norm:  # Qwen3 normalises each head's q and k before RoPE
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.qkv: FusedLinear | None = None
        self.out: FusedLinear | None = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionBackend) -> torch.Tensor:
        b, t, _ = x.shape
        hq, hkv, d = self.n_heads, self.n_kv, self.head_dim
        linears = (self.q_proj, self.k_proj, self.v_proj)
        if runs_fused(self.qkv, linears) and not hasattr(self, "q_norm"):
            # q and k side by side in the fused output: rotated in one pass (the ops, not the math, are fewer)
            y = self.qkv.matmul(x)
            qk = apply_rotary(y[..., :(hq + hkv) * d].view(b, t, hq + hkv, d), cos, sin)
            q, k, v = qk[:, :, :hq], qk[:, :, hq:], y[..., (hq + hkv) * d:].view(b, t, hkv, d)
        else:
            q, k, v = project(self.qkv, linears, x)
            q, k, v = q.view(b, t, hq, d), k.view(b, t, hkv, d), v.view(b, t, hkv, d)
            if hasattr(self, "q_norm"):
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = attn(self.layer, q, k, v)
        return project(self.out, (self.o_proj,), out.reshape(b, t, self.n_heads * self.head_dim))[0]


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.gate_up: FusedLinear | None = None
        self.down: FusedLinear | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = project(self.gate_up, (self.gate_proj, self.up_proj), x)
        return project(self.down, (self.down_proj,), F.silu(gate) * up)[0]


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.self_attn = Attention(cfg, layer)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionBackend) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attn)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """Embeddings, decoder layers and the final norm (transformers' `model.` prefix)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = RotaryEmbedding(cfg)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.gradient_checkpointing = False
        self.head: FusedLinear | None = None

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        attention: AttentionBackend | None = None,
    ) -> torch.Tensor:
        """input_ids [B, T] (or [T]) -> final hidden states [B, T, hidden]. Use `compute_logits` next."""
        squeeze = input_ids.dim() == 1
        if squeeze:
            input_ids = input_ids[None]
            positions = positions[None] if positions is not None else None
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        attention = attention or CausalAttention(sliding_window=self.config.sliding_window)
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rotary(positions, x.dtype)
        for layer in self.model.layers:
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, attention, use_reentrant=False)
            else:
                x = layer(x, cos, sin, attention)
        x = self.model.norm(x)
        return x[0] if squeeze else x

    def fuse_projections(self, pack: bool = False) -> None:
        """One GEMM for q/k/v and one for gate/up at inference, and with `pack` every linear layer and
        the head on MKL's packed weights (see the module docstring). Idempotent."""
        def fused(current: FusedLinear | None, linears: list[nn.Linear]) -> FusedLinear | None:
            if any(type(lin) is not nn.Linear for lin in linears):  # e.g. LoRA wrappers: run as they are
                return None
            if current is None or current.ptrs != current._ptrs() or current.pack != (pack and packable(
                    linears[0].weight)):
                return FusedLinear(linears, pack)
            return current

        for layer in self.model.layers:
            a, m = layer.self_attn, layer.mlp
            a.qkv = fused(a.qkv, [a.q_proj, a.k_proj, a.v_proj])
            m.gate_up = fused(m.gate_up, [m.gate_proj, m.up_proj])
            if pack:
                a.out, m.down = fused(a.out, [a.o_proj]), fused(m.down, [m.down_proj])
        if pack:
            self.head = fused(self.head, [self.lm_head])

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return project(self.head, (self.lm_head,), hidden)[0]

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None,
               attention: AttentionBackend | None = None) -> torch.Tensor:
        """Logits for every position; convenient for tests and short sequences."""
        return self.compute_logits(self.forward(input_ids, positions, attention))
