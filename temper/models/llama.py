"""The Llama-family decoder: Llama 2/3, Mistral, Qwen2/2.5, Qwen3 and SmolLM2 in one module.

Read top to bottom: RMSNorm, attention (grouped-query, optional bias and q/k norm), SwiGLU
MLP, the decoder layer, the model. Parameter names equal transformers' so checkpoints load
without renaming. The attention itself is a pluggable backend (see `attention.py`).

`prepare_inference()` (the rollout engine calls it) switches the modules to their inference variants in
`fast_path.py`: fused q/k/v and gate/up GEMMs, prepacked weights, temper.native's kernels. This file is the
math those variants must reproduce (tests/models and tests/engine compare them); training runs it as written.
"""

import torch
import torch.nn.functional as F
from torch import nn

from temper.models.attention import AttentionBackend, CausalAttention
from temper.models.config import ModelConfig
from temper.models.fused_linear import PackChoice
from temper.models.rope import RotaryEmbedding, apply_rotary


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

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionBackend) -> torch.Tensor:
        b, t, _ = x.shape
        hq, hkv, d = self.n_heads, self.n_kv, self.head_dim
        q = self.q_proj(x).view(b, t, hq, d)
        k = self.k_proj(x).view(b, t, hkv, d)
        v = self.v_proj(x).view(b, t, hkv, d)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = attn(self.layer, q, k, v)
        return self.o_proj(out.reshape(b, t, hq * d))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


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
        """The inference fast path (`fast_path.install`): fused and optionally prepacked GEMMs, and with `native`
        temper.native's kernels. Idempotent; the parameters stay the same objects."""
        from temper.models.fast_path import install

        install(self, pack, native)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None,
               attention: AttentionBackend | None = None) -> torch.Tensor:
        """Logits for every position; convenient for tests and short sequences."""
        return self.compute_logits(self.forward(input_ids, positions, attention))
