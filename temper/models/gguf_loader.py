"""Read a GGUF file (llama.cpp's format) as a Hugging Face config, state dict and tokenizer.

A GGUF stores llama.cpp's tensor names (`blk.3.attn_q.weight`), often quantized, and its
hyper-parameters and tokenizer as metadata. We dequantize every tensor to fp32, rename it to
transformers' names, and undo the q/k row permutation llama.cpp applies to the `llama`
architecture (its RoPE kernel pairs dimensions (2i, 2i+1); the HF layout pairs (i, i+d/2)).
The result is written once as an ordinary HF folder (see `registry.py`); nothing here
depends on transformers.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from temper.errors import TemperError

# GGUF `general.architecture` -> (HF architecture, llama.cpp permuted q/k rows for it).
GGUF_ARCHITECTURES: dict[str, tuple[str, bool]] = {
    "llama": ("LlamaForCausalLM", True),
    "mistral": ("MistralForCausalLM", True),
    "qwen2": ("Qwen2ForCausalLM", False),
    "qwen3": ("Qwen3ForCausalLM", False),
}

# Per-layer GGUF tensor names -> transformers' names (`{i}` is the layer).
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# The big arrays that only the tokenizer needs; read lazily because converting them costs time.
_TOKENIZER_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type")


@dataclass
class GGUFFile:
    path: Path
    reader: Any  # gguf.GGUFReader
    metadata: dict[str, Any]  # every key except the large tokenizer arrays (see `array`)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "?"))

    def array(self, key: str) -> list[Any] | None:
        field = self.reader.fields.get(key)
        return None if field is None else list(field.contents())


def open_gguf(path: str | Path) -> GGUFFile:
    """Open and check a GGUF file; every failure is one line naming the file."""
    from gguf import GGUFReader  # imported here: it is only needed when a GGUF is actually read

    path = Path(path)
    if not path.is_file():
        raise TemperError(f"{path}: no such GGUF file")
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # gguf raises ValueError/struct errors/IndexError on bad or truncated files
        raise TemperError(f"{path}: not a readable GGUF file, truncated or corrupt ({exc})") from None
    metadata = {}
    for key, field in reader.fields.items():
        if key in _TOKENIZER_ARRAYS:
            continue
        try:
            metadata[key] = field.contents()
        except Exception:  # a value type gguf cannot decode is not one we need
            continue
    gguf = GGUFFile(path, reader, metadata)
    if gguf.architecture not in GGUF_ARCHITECTURES:
        raise TemperError(
            f"{path}: unsupported GGUF architecture {gguf.architecture!r} "
            f"(temper reads {', '.join(sorted(GGUF_ARCHITECTURES))})"
        )
    return gguf


def gguf_hf_config(gguf: GGUFFile) -> dict[str, Any]:
    """The transformers `config.json` equivalent of the file's hyper-parameters."""
    arch = gguf.architecture
    meta = gguf.metadata

    def get(key: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{key}", default)

    tensor_names = {t.name for t in gguf.reader.tensors}
    if "rope_freqs.weight" in tensor_names:
        # llama3-style scaling is stored as a frequency tensor, not as the parameters we need.
        raise TemperError(f"{gguf.path}: GGUF files with a rope_freqs tensor (Llama 3.1 RoPE) are not supported")
    hidden = int(get("embedding_length"))
    n_heads = int(get("attention.head_count"))
    n_kv = get("attention.head_count_kv", n_heads)
    if isinstance(n_kv, list):
        raise TemperError(f"{gguf.path}: per-layer key/value head counts are not supported")
    head_dim = get("attention.key_length") or get("rope.dimension_count") or hidden // n_heads
    tokens = gguf.reader.fields.get("tokenizer.ggml.tokens")
    vocab = get("vocab_size") or (len(tokens.data) if tokens is not None else None)
    cfg: dict[str, Any] = {
        "architectures": [GGUF_ARCHITECTURES[arch][0]],
        "model_type": arch,
        "vocab_size": int(vocab) if vocab is not None else _tensor_rows(gguf, "token_embd.weight"),
        "hidden_size": hidden,
        "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": int(get("block_count")),
        "num_attention_heads": n_heads,
        "num_key_value_heads": int(n_kv),
        "head_dim": int(head_dim),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(get("context_length", 2048)),
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
    }
    scaling = get("rope.scaling.type")
    if scaling in ("linear", "yarn"):
        cfg["rope_scaling"] = {"rope_type": scaling, "factor": float(get("rope.scaling.factor", 1.0))}
        if scaling == "yarn":
            cfg["rope_scaling"]["original_max_position_embeddings"] = int(get("rope.scaling.original_context_length"))
    elif scaling not in (None, "none"):
        raise TemperError(f"{gguf.path}: RoPE scaling {scaling!r} in a GGUF file is not supported")
    if get("attention.sliding_window") and arch == "mistral":
        cfg["sliding_window"] = int(get("attention.sliding_window"))
    if arch == "qwen2":
        cfg["attention_bias"] = True
    return cfg


def gguf_state_dict(gguf: GGUFFile, hf_config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Every tensor dequantized to fp32 under its transformers name, q/k rows un-permuted."""
    from gguf.quants import dequantize

    permuted = GGUF_ARCHITECTURES[gguf.architecture][1]
    heads = {"q_proj": hf_config["num_attention_heads"], "k_proj": hf_config["num_key_value_heads"]}
    state: dict[str, torch.Tensor] = {}
    for tensor in gguf.reader.tensors:
        name = _hf_name(tensor.name)
        if name is None:
            raise TemperError(f"{gguf.path}: unexpected tensor {tensor.name!r} for architecture {gguf.architecture!r}")
        try:
            values = dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError:
            raise TemperError(
                f"{gguf.path}: tensor {tensor.name} uses quantization {tensor.tensor_type.name}, which gguf cannot read"
            ) from None
        # gguf lists dims fastest-first; numpy rows are the reverse, which is torch's [out, in].
        shape = [int(d) for d in reversed(tensor.shape.tolist())]
        # np.array copies: the file is mmapped read-only, and torch wants writable memory.
        weight = torch.from_numpy(np.array(values, dtype=np.float32)).reshape(shape)
        kind = name.split(".")[-2]
        if permuted and kind in heads:
            weight = _unpermute(weight, heads[kind])
        state[name] = weight
    if hf_config["tie_word_embeddings"]:
        state.pop("lm_head.weight", None)
    return state


def _hf_name(gguf_name: str) -> str | None:
    base, _, suffix = gguf_name.rpartition(".")  # suffix: weight or bias
    if base in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[base]}.{suffix}"
    parts = base.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}.{suffix}"
    return None


def _unpermute(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Inverse of llama.cpp's `permute`: within each head, interleaved (2i, 2i+1) rows -> halves."""
    rows = weight.shape[0]
    half = rows // n_heads // 2
    return weight.reshape(n_heads, half, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


def _tensor_rows(gguf: GGUFFile, name: str) -> int:
    for tensor in gguf.reader.tensors:
        if tensor.name == name:
            return int(tensor.shape[-1])
    raise TemperError(f"{gguf.path}: no {name} tensor and no vocab size in the metadata")
