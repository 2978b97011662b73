"""`load_model` and `save_model`: the two calls the rest of temper uses to get a model."""

from dataclasses import dataclass
from pathlib import Path

import torch

from temper.models.checkpoint import load_checkpoint, save_checkpoint
from temper.models.config import ModelConfig
from temper.models.llama import LlamaForCausalLM
from temper.models.registry import resolve_model
from temper.models.tokenizer import Tokenizer


@dataclass
class LoadedModel:
    model: LlamaForCausalLM  # in eval mode
    tokenizer: Tokenizer
    config: ModelConfig
    path: Path  # the resolved Hugging Face folder


def load_model(name_or_path: str | Path, dtype: torch.dtype = torch.float32,
               device: torch.device | str = "cpu") -> LoadedModel:
    """A bundled name (`smollm2-135m`), a local HF folder or GGUF file, or a Hub id, on `device` (a
    resolved one: `temper.runtime.resolve_device(cfg.runtime.device)`; models import no runtime settings)."""
    folder = resolve_model(name_or_path)
    model = load_checkpoint(folder, dtype, device)
    return LoadedModel(model=model, tokenizer=Tokenizer.from_folder(folder), config=model.config, path=folder)


def save_model(model: LlamaForCausalLM, tokenizer: Tokenizer | None, folder: str | Path) -> Path:
    """An HF folder (safetensors, config.json, tokenizer files) that transformers loads as is."""
    folder = Path(folder)
    save_checkpoint(model, folder)
    if tokenizer is not None:
        tokenizer.save(folder)
    return folder
