"""LoRA adapters: W x + (alpha / r) B A x on chosen linear layers, the base frozen.

A small own implementation (no peft dependency): `apply_lora` swaps target `nn.Linear`s for
`LoRALinear`, and `merged_state_dict` folds the adapters back into plain weights under the
original parameter names, which is what the engine and `save_model` expect.
"""

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.base.requires_grad_(False)
        self.scale = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))  # zero: starts as the base model
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.scale * (self.lora_B @ self.lora_A)


def apply_lora(model: nn.Module, rank: int = 8, alpha: float = 16.0, targets: list[str] | None = None) -> int:
    """Freeze every parameter, then wrap the target linears with trainable adapters; returns how many."""
    targets = targets or ["q_proj", "k_proj", "v_proj", "o_proj"]
    model.requires_grad_(False)
    count = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, LoRALinear(child, rank, alpha))
                count += 1
    return count


def has_lora(model: nn.Module) -> bool:
    return any(isinstance(m, LoRALinear) for m in model.modules())


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights with adapters folded in, under the names the plain model has."""
    state = {}
    lora_prefixes = {n: m for n, m in model.named_modules() if isinstance(m, LoRALinear)}
    for name, tensor in model.state_dict().items():
        owner = next((p for p in lora_prefixes if name.startswith(p + ".")), None)
        if owner is None:
            state[name] = tensor.detach().clone()
            continue
        rest = name[len(owner) + 1:]
        if rest == "base.weight":
            state[owner + ".weight"] = lora_prefixes[owner].merged_weight().detach().clone()
        elif rest.startswith("base."):
            state[owner + "." + rest[len("base."):]] = tensor.detach().clone()
    return state
