"""Hugging Face checkpoint folders: config.json + single or sharded safetensors.

`load_checkpoint` builds the model without random initialisation and assigns the stored
tensors as its weights (no copy); `save_checkpoint` writes a folder transformers' own
`AutoModelForCausalLM.from_pretrained` loads.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from temper.errors import TemperError
from temper.models.config import ModelConfig
from temper.models.llama import LlamaForCausalLM

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def read_config(folder: Path) -> ModelConfig:
    path = folder / "config.json"
    if not path.is_file():
        raise TemperError(f"{path}: no such file (a model folder needs config.json)")
    try:
        hf = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TemperError(f"{path}: invalid JSON ({exc})") from None
    try:
        return ModelConfig.from_hf(hf, source=str(path))
    except KeyError as exc:
        raise TemperError(f"{path}: missing field {exc.args[0]!r}") from None


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a folder: one file, or the shards its index names."""
    if (folder / INDEX).is_file():
        index = json.loads((folder / INDEX).read_text())
        return [folder / name for name in sorted(set(index["weight_map"].values()))]
    if (folder / SINGLE).is_file():
        return [folder / SINGLE]
    found = sorted(folder.glob("*.safetensors"))
    if not found:
        raise TemperError(f"{folder}: no safetensors weights (expected {SINGLE} or {INDEX})")
    return found


def load_state_dict(folder: Path, dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Every stored tensor in `dtype`, read straight onto `device` (safetensors copies each tensor there
    once: no full CPU copy of the model first)."""
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(folder):
        if not path.is_file():
            raise TemperError(f"{path}: no such file (named by {INDEX})")
        try:
            with safe_open(str(path), framework="pt", device=str(device)) as f:
                for key in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                    state[key] = f.get_tensor(key).to(dtype)
        except (SafetensorError, OSError) as exc:  # a truncated or corrupt file
            raise TemperError(f"{path}: not a readable safetensors file ({exc})") from None
    return state


def load_checkpoint(folder: str | Path, dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu") -> LlamaForCausalLM:
    """The model stored in an HF folder, in eval mode, on `device`."""
    folder = Path(folder)
    cfg = read_config(folder)
    state = load_state_dict(folder, dtype, device)
    state = {k: v for k, v in state.items() if "rotary_emb" not in k}  # old checkpoints stored inv_freq
    model = empty_model(cfg)
    assign_weights(model, state, f"{folder}: weights do not match config.json")
    # The weights are on `device` already; this moves what was built here (the RoPE buffer, fp32 on purpose).
    return model.to(device).eval()


def assign_weights(model: LlamaForCausalLM, state: dict[str, torch.Tensor], mismatch: str) -> None:
    """Make `state`'s tensors the model's weights (no copy); every weight must be there, as
    `empty_model` leaves uninitialised memory behind any that is not."""
    tied = model.config.tie_word_embeddings
    state = {k: v for k, v in state.items() if not (tied and k == "lm_head.weight")}
    expected = {k for k in model.state_dict() if not (tied and k == "lm_head.weight")}
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        detail = f"missing {sorted(missing)[:3]}" if missing else f"unexpected {sorted(unexpected)[:3]}"
        raise TemperError(f"{mismatch} ({detail})")
    model.load_state_dict(state, strict=False, assign=True)
    if tied:  # assign replaced the embedding Parameter: point the head at the new one
        model.lm_head.weight = model.model.embed_tokens.weight


def empty_model(cfg: ModelConfig) -> LlamaForCausalLM:
    """A model whose weights are uninitialised memory, to be replaced by `load_state_dict(assign=True)`.

    Not the meta device: there, the RoPE set-up and `normal_` run Python decompositions whose
    first use imports torch._dynamo (3-5 s per process, more than reading the weights).
    """
    with _skip_init():
        return LlamaForCausalLM(cfg)


@contextmanager
def _skip_init() -> Iterator[None]:
    """torch.nn.init as no-ops: random init of weights about to be overwritten is wasted time."""
    names = ("normal_", "uniform_", "kaiming_uniform_", "trunc_normal_", "xavier_uniform_", "zeros_", "ones_")
    saved = {name: getattr(torch.nn.init, name) for name in names}
    try:
        for name in names:
            setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.nn.init, name, fn)


def save_checkpoint(model: LlamaForCausalLM, folder: str | Path, extra_config: dict[str, Any] | None = None) -> None:
    """config.json, generation_config.json and model.safetensors (tied weights stored once)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    hf = {**cfg.to_hf(), **(extra_config or {})}
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    dtypes = {v.dtype for v in state.values()}
    if len(dtypes) == 1:
        hf["torch_dtype"] = str(next(iter(dtypes))).removeprefix("torch.")
    if (folder / INDEX).is_file():  # an older sharded save here would shadow the new single file
        for shard in weight_files(folder):
            shard.unlink(missing_ok=True)
        (folder / INDEX).unlink()
    save_file(state, str(folder / SINGLE), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
    generation = {k: getattr(cfg, k) for k in ("bos_token_id", "eos_token_id") if getattr(cfg, k) is not None}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
