"""AdamW with linear warmup and cosine decay, on fp32 master weights."""

import math

import torch

from temper.rl.config import OptimConfig


def lr_factor(step: int, cfg: OptimConfig) -> float:
    """Multiplier of cfg.lr at optimizer step `step` (0-based): warmup, then cosine to min_lr_ratio."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def staleness_lr_scale(staleness: list[int], rule: str) -> float:
    """The factor on a step's lr for the staleness of its trained samples (OptimConfig.staleness_lr)."""
    if rule == "none" or not staleness:
        return 1.0
    return 1.0 / max(1.0, sum(staleness) / len(staleness))


def build_optimizer(params, cfg: OptimConfig) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    params = [p for p in params if p.requires_grad]
    # Parameters stay fp32 (master weights) whatever the compute dtype; bf16 is autocast only.
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
    return opt, sched
