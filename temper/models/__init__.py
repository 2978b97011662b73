"""Llama-family models: configuration, RoPE, the decoder, attention backends, checkpoints, tokenizers."""

from temper.models.attention import AttentionBackend, CausalAttention
from temper.models.config import ModelConfig
from temper.models.llama import LlamaForCausalLM
from temper.models.loading import LoadedModel, load_model, save_model
from temper.models.reference_generate import generate_reference
from temper.models.registry import BUNDLED, resolve_model
from temper.models.tokenizer import Tokenizer

__all__ = [
    "BUNDLED",
    "AttentionBackend",
    "CausalAttention",
    "LlamaForCausalLM",
    "LoadedModel",
    "ModelConfig",
    "Tokenizer",
    "generate_reference",
    "load_model",
    "resolve_model",
    "save_model",
]
