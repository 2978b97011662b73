"""The Llama-family decoder: Llama 2/3, Mistral, Qwen2/2.5, Qwen3 and SmolLM2 in one module.

Read top to bottom: RMSNorm, attention (grouped-query, optional bias and q/k norm), SwiGLU
MLP, the decoder layer, the model. Parameter names equal transformers' so checkpoints load
without renaming. The attention itself is a pluggable backend (see `attention.py`).

`prepare_inference()` (the rollout engine calls it) makes q/k/v_proj's weights views of one
[q; k; v] matrix and gate/up_proj's of one [gate; up] matrix, so that inference runs one GEMM where
there were three and two, optionally on prepacked weights (`fused_linear.py`); the parameters stay
the same objects (optimizers and in-place weight loads keep working, and write through to the fused
matrix). Training (grad enabled) runs the separate projections, so gradients land on them as before.
"""

import torch
import torch.nn.functional as F
from torch import nn

from temper import native
from temper.models.attention import AttentionBackend, CausalAttention
from temper.models.config import ModelConfig
from temper.models.fused_linear import FusedLinear, PackChoice, packable, packed_kernel, project, runs_fused
from temper.models.rope import RotaryEmbedding, apply_rotary


def runs_native(module: nn.Module, x: torch.Tensor) -> bool:
    """`prepare_inference(native=True)` set this module on temper's C++ kernels, and x is what they take:
    fp32 on the CPU, at inference."""
    return module.native and x.dtype == torch.float32 and x.device.type == "cpu" and not torch.is_grad_enabled()


class RMSNorm(nn.Module):
    native = False  # temper.native's kernel at inference (prepare_inference)

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if runs_native(self, x):  # one op where torch's CPU rms_norm runs six
            return native.rms_norm(x, self.weight, self.eps)
        if x.dtype == torch.float32:  # one fused op, bit-identical to the lines below in fp32
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Attention(nn.Module):
    native = False  # RoPE on temper.native's kernel at inference (prepare_inference)

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
            if runs_native(self, y):  # rotated in place: one op
                native.rope_(y.view(b * t, -1, d)[:, :hq + hkv], cos.view(b * t, d), sin.view(b * t, d))
                qk = y[..., :(hq + hkv) * d].view(b, t, hq + hkv, d)
            else:
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
    native = False  # silu(gate) * up on temper.native's kernel at inference (prepare_inference)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.gate_up: FusedLinear | None = None
        self.down: FusedLinear | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = (self.gate_proj, self.up_proj)
        if runs_fused(self.gate_up, linears) and runs_native(self, x):
            act = native.silu_mul(self.gate_up.matmul(x))
        else:
            gate, up = project(self.gate_up, linears, x)
            act = F.silu(gate) * up
        return project(self.down, (self.down_proj,), act)[0]


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

    def prepare_inference(self, pack: PackChoice = "off", native: bool = False) -> None:
        """One GEMM for q/k/v and one for gate/up at inference; with a packed kernel (see
        `fused_linear.py`) every linear layer and the head also run on its prepacked weights; with
        `native` (the caller checked temper.native is built) products of 1 to 4 rows run on its small
        GEMM, and RMSNorm, RoPE and SwiGLU's activation on its kernels (fp32 on the CPU, at inference;
        anything else runs as before). Idempotent."""
        kernel = packed_kernel(pack)

        def fused(current: FusedLinear | None, linears: list[nn.Linear]) -> FusedLinear | None:
            if any(type(lin) is not nn.Linear for lin in linears):  # e.g. LoRA wrappers: run as they are
                return None
            want = kernel if packable(linears[0].weight) else None
            if current is None or current.ptrs != current._ptrs() or current.kernel != want or \
                    bool(current.small_rows) != (native and packable(linears[0].weight)):
                return FusedLinear(linears, want, native)
            return current

        for module in self.modules():
            if isinstance(module, RMSNorm | Attention | MLP):
                module.native = native
        for layer in self.model.layers:
            a, m = layer.self_attn, layer.mlp
            a.qkv = fused(a.qkv, [a.q_proj, a.k_proj, a.v_proj])
            m.gate_up = fused(m.gate_up, [m.gate_proj, m.up_proj])
            if kernel or native:
                a.out, m.down = fused(a.out, [a.o_proj]), fused(m.down, [m.down_proj])
        if kernel or native:
            self.head = fused(self.head, [self.lm_head])

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return project(self.head, (self.lm_head,), hidden)[0]

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None,
               attention: AttentionBackend | None = None) -> torch.Tensor:
        """Logits for every position; convenient for tests and short sequences."""
        return self.compute_logits(self.forward(input_ids, positions, attention))
