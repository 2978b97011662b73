"""Shared helpers for the engine tests: tiny random models with a transformers twin, parity checks."""

import torch
from transformers import LlamaConfig
from transformers import LlamaForCausalLM as HFLlama

from temper.generation import Completion
from temper.models import LlamaForCausalLM, ModelConfig


def tiny_config(**overrides) -> ModelConfig:
    base = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                tie_word_embeddings=False, eos_token_id=None)
    base.update(overrides)
    return ModelConfig(**base)


def tiny_pair(seed: int = 0, **overrides) -> tuple[LlamaForCausalLM, HFLlama]:
    """A random tiny temper model and a transformers model with the same weights.

    Weights are scaled up from the default init so logits are peaked: greedy choices then have
    clear margins, as in a trained model, instead of near-ties everywhere."""
    cfg = tiny_config(**overrides)
    torch.manual_seed(seed)
    hf_cfg = LlamaConfig(**{k: v for k, v in cfg.to_hf().items() if k not in ("architectures", "torch_dtype")})
    hf = HFLlama(hf_cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.08)
    model = LlamaForCausalLM(cfg).eval()
    model.load_state_dict(hf.state_dict(), strict=False)
    return model, hf


def random_prompts(lengths: list[int], vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


@torch.inference_mode()
def reference_greedy(model: LlamaForCausalLM, prompt: list[int], n: int) -> tuple[list[int], list[float]]:
    """Greedy continuation by full forward passes with the dense attention: tokens and their top-2 margins."""
    ids = list(prompt)
    margins = []
    for _ in range(n):
        logits = model.logits(torch.tensor(ids)[None])[0, -1]
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(logits.argmax()))
    return ids[len(prompt):], margins


def check_greedy(got: list[int], ref: list[int], margins: list[float], report: list[str], label: str,
                 tol: float = 1e-4) -> None:
    """Identical, or diverging first where the reference's top-two margin is below `tol` (reported)."""
    for i, (a, b) in enumerate(zip(got, ref, strict=False)):
        if a != b:
            assert margins[i] < tol, f"{label}: token {i} differs ({a} vs {b}) with margin {margins[i]:.2e}"
            report.append(f"{label}: near-tie divergence at token {i} (margin {margins[i]:.2e})")
            return
    assert len(got) == len(ref), f"{label}: {len(got)} tokens vs {len(ref)}"


def full_logprobs(model: LlamaForCausalLM, c: Completion, temperature: float = 1.0) -> list[float]:
    """log_softmax(logits / T) of each generated token, from one full forward pass."""
    ids = torch.tensor(c.prompt_token_ids + c.token_ids)
    with torch.inference_mode():
        logits = model.logits(ids[None])[0].float()
    lp = torch.log_softmax(logits / (temperature or 1.0), -1)
    start = len(c.prompt_token_ids)
    return [float(lp[start - 1 + i, t]) for i, t in enumerate(c.token_ids)]
