"""Parity with transformers, the reference implementation: identical weights, identical logits."""

import pytest
import torch
import transformers

from temper.models import LlamaForCausalLM, ModelConfig, save_model
from temper.models.checkpoint import load_checkpoint

BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)
CASES = {
    "llama": (transformers.LlamaConfig, {}),
    "llama-linear": (transformers.LlamaConfig, {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "llama-dynamic": (transformers.LlamaConfig, {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}),
    "llama-yarn": (transformers.LlamaConfig,
                   {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}}),
    "llama3": (transformers.LlamaConfig, {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}}),
    "qwen2": (transformers.Qwen2Config, {}),
    "qwen2-yarn": (transformers.Qwen2Config,
                   {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32}}),
    "qwen3": (transformers.Qwen3Config, {"head_dim": 32}),
    "qwen3-linear": (transformers.Qwen3Config,
                     {"head_dim": 32, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    "mistral": (transformers.MistralConfig, {"sliding_window": 8}),
}


def _reference(name: str) -> transformers.PreTrainedModel:
    cls, overrides = CASES[name]
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cls(**BASE, **overrides)).eval()


def _max_diff(hf: transformers.PreTrainedModel, ours: LlamaForCausalLM, ids: torch.Tensor) -> float:
    with torch.no_grad():
        return (hf(ids).logits - ours.logits(ids)).abs().max().item()


@pytest.mark.parametrize("name", CASES)
def test_random_weights_match_transformers(name):
    hf = _reference(name)
    ours = LlamaForCausalLM(ModelConfig.from_hf(hf.config.to_dict())).eval()
    ours.load_state_dict(hf.state_dict(), strict=False)  # strict=False: transformers keeps rotary buffers
    ids = torch.randint(0, BASE["vocab_size"], (2, 100), generator=torch.Generator().manual_seed(1))
    assert _max_diff(hf, ours, ids) < 1e-4  # 100 tokens: past max_position_embeddings, so scaling matters


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3-linear", "mistral"])
def test_save_then_transformers_loads_same_logits(name, tmp_path, smollm2_tokenizer):
    hf = _reference(name)
    ours = LlamaForCausalLM(ModelConfig.from_hf(hf.config.to_dict())).eval()
    ours.load_state_dict(hf.state_dict(), strict=False)
    save_model(ours, smollm2_tokenizer, tmp_path)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    assert type(reloaded) is type(hf)
    ids = torch.randint(0, BASE["vocab_size"], (1, 40))
    assert _max_diff(reloaded, ours, ids) < 1e-5
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "Round trip: ünïcode, digits 12345 and <|im_end|> specials."
    assert tok.encode(text, add_special_tokens=False) == smollm2_tokenizer.encode(text)


def test_transformers_sharded_checkpoint_loads(tmp_path):
    hf = _reference("qwen2")
    hf.save_pretrained(tmp_path, max_shard_size="100KB")  # several shards + model.safetensors.index.json
    assert (tmp_path / "model.safetensors.index.json").is_file()
    ours = load_checkpoint(tmp_path)
    ids = torch.randint(0, BASE["vocab_size"], (1, 50))
    assert _max_diff(hf, ours, ids) < 1e-5


def test_saving_over_a_sharded_folder_replaces_it(tmp_path):
    _reference("qwen2").save_pretrained(tmp_path, max_shard_size="100KB")
    other = _reference("llama")
    ours = LlamaForCausalLM(ModelConfig.from_hf(other.config.to_dict())).eval()
    ours.load_state_dict(other.state_dict(), strict=False)
    save_model(ours, None, tmp_path)
    assert not (tmp_path / "model.safetensors.index.json").exists()
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == ["model.safetensors"]
    assert _max_diff(other, load_checkpoint(tmp_path), torch.randint(0, BASE["vocab_size"], (1, 20))) < 1e-5
