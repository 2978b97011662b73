"""Llama-family models: configuration, RoPE, the decoder, attention backends, checkpoints, tokenizers."""

from temper.models.attention import AttentionBackend, CausalAttention
from temper.models.config import ModelConfig
from temper.models.llama import LlamaForCausalLM

__all__ = ["AttentionBackend", "CausalAttention", "LlamaForCausalLM", "ModelConfig"]
