"""Tiny random models and synthetic trajectories for the RL tests."""

import random

import pytest
import torch

from temper.models import LlamaForCausalLM, ModelConfig
from temper.trajectory import Trajectory

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8)


def make_model(seed: int = 0, **overrides) -> LlamaForCausalLM:
    """A tiny random Llama; small init so the policy is not already peaked (entropy near log V)."""
    torch.manual_seed(seed)
    model = LlamaForCausalLM(ModelConfig(**{**TINY, **overrides}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0, 0.1 if "embed" in name else 0.05)
    return model


def make_trajectories(seed: int = 0, groups: int = 3, per_group: int = 4, vocab: int = 64,
                      obs: bool = False) -> list[Trajectory]:
    """Random prompts and responses (optionally an observation turn), mixed rewards in every group."""
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        for k in range(per_group):
            p, r = rng.randint(2, 6), rng.randint(2, 9)
            ids = [rng.randrange(vocab) for _ in range(p + r)]
            mask = [0] * p + [1] * r
            if obs:  # an observation (no loss) then a second model turn
                o, r2 = rng.randint(1, 4), rng.randint(1, 4)
                ids += [rng.randrange(vocab) for _ in range(o + r2)]
                mask += [0] * o + [1] * r2
            lps = [-rng.uniform(3.0, 5.0) if m else 0.0 for m in mask]
            out.append(Trajectory(ids, mask, lps, [0 if m else -1 for m in mask], reward=float(k % 2 == g % 2),
                                  group_id=f"g{g}", id=f"t{g}.{k}"))
    return out


@pytest.fixture
def tiny_model() -> LlamaForCausalLM:
    return make_model()
