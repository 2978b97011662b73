"""The one model configuration shared by every Llama-family architecture temper runs.

It is read from (and written back to) a Hugging Face `config.json`, so that a checkpoint
saved by temper loads in transformers and the other way round.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

from temper.errors import TemperError

# Architecture name in config.json -> what differs from plain Llama.
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "LlamaForCausalLM": {"model_type": "llama"},
    "MistralForCausalLM": {"model_type": "mistral"},
    "Qwen2ForCausalLM": {"model_type": "qwen2", "attention_bias": True},
    "Qwen3ForCausalLM": {"model_type": "qwen3", "qk_norm": True},
}
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")


@dataclass
class ModelConfig:
    vocab_size: int = 49152
    hidden_size: int = 576
    intermediate_size: int = 1536
    num_hidden_layers: int = 30
    num_attention_heads: int = 9
    num_key_value_heads: int = 3
    head_dim: int = 64
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    qk_norm: bool = False
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    architecture: str = "LlamaForCausalLM"
    model_type: str = "llama"
    extra: dict[str, Any] = field(default_factory=dict)  # other keys, kept for a faithful round trip

    @property
    def rope_type(self) -> str:
        if not self.rope_scaling:
            return "default"
        return self.rope_scaling.get("rope_type", self.rope_scaling.get("type", "default"))

    @classmethod
    def from_hf(cls, hf: dict[str, Any], source: str = "config.json") -> "ModelConfig":
        archs = hf.get("architectures") or [_arch_for_model_type(hf.get("model_type"), source)]
        arch = archs[0]
        if arch not in ARCHITECTURES:
            raise TemperError(
                f"{source}: unsupported architecture {arch!r} (temper runs {', '.join(sorted(ARCHITECTURES))})"
            )
        traits = ARCHITECTURES[arch]
        n_heads = hf["num_attention_heads"]
        rope_scaling, rope_theta = _rope_from_hf(hf)
        known = {f for f in cls.__dataclass_fields__ if f != "extra"} | {
            "architectures", "rope_parameters", "use_sliding_window", "head_dim", "num_key_value_heads",
        }
        use_sw = hf.get("use_sliding_window", arch == "MistralForCausalLM")
        cfg = cls(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_hidden_layers=hf["num_hidden_layers"],
            num_attention_heads=n_heads,
            num_key_value_heads=hf.get("num_key_value_heads") or n_heads,
            head_dim=hf.get("head_dim") or hf["hidden_size"] // n_heads,
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=hf.get("max_position_embeddings", 2048),
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            attention_bias=hf.get("attention_bias", traits.get("attention_bias", False)),
            qk_norm=traits.get("qk_norm", False),
            sliding_window=hf.get("sliding_window") if use_sw else None,
            bos_token_id=hf.get("bos_token_id"),
            eos_token_id=hf.get("eos_token_id"),
            architecture=arch,
            model_type=traits["model_type"],
            extra={k: v for k, v in hf.items() if k not in known},
        )
        if cfg.rope_type not in ROPE_TYPES:
            raise TemperError(f"{source}: rope type {cfg.rope_type!r} is not supported ({', '.join(ROPE_TYPES)})")
        return cfg

    def to_hf(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        arch = d.pop("architecture")
        d.pop("qk_norm")
        d["architectures"] = [arch]
        d["torch_dtype"] = "float32"
        rope_scaling = d.pop("rope_scaling")
        d["rope_parameters"] = {"rope_type": "default", **(rope_scaling or {}), "rope_theta": self.rope_theta}
        if self.sliding_window is not None:
            d["use_sliding_window"] = True
        return {**extra, **d}


def _arch_for_model_type(model_type: str | None, source: str) -> str:
    for arch, traits in ARCHITECTURES.items():
        if traits["model_type"] == model_type:
            return arch
    raise TemperError(f"{source}: no architectures entry and unknown model_type {model_type!r}")


def _rope_from_hf(hf: dict[str, Any]) -> tuple[dict[str, Any] | None, float]:
    """transformers 4.x wrote `rope_theta` + `rope_scaling`; 5.x writes `rope_parameters`."""
    params = dict(hf.get("rope_parameters") or {})
    scaling = dict(hf.get("rope_scaling") or {})
    theta = params.pop("rope_theta", None) or hf.get("rope_theta") or 10000.0
    merged = {**scaling, **params}
    if "type" in merged and "rope_type" not in merged:
        merged["rope_type"] = merged.pop("type")
    if merged.get("rope_type", "default") == "default" and set(merged) <= {"rope_type", "partial_rotary_factor"}:
        return None, float(theta)
    return merged, float(theta)
