"""Shared by the vLLM tests (a module of its own: `conftest` is a name every test folder has)."""

from pathlib import Path

import torch


def tiny_vllm_recipe(model: Path, out: Path, **orchestrator) -> dict:
    """The tiny recipe (the toy model learns 'say 7' -> '7') on the vLLM backend."""
    return {
        "model": str(model),
        "suites": [{"spec": "toy:n=64,seed=0,digits=2"}],
        "algorithm": {"optim": {"lr": 0.03, "total_steps": 1000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "agent": {"max_turn_tokens": 1, "system_prompt": "say"},
        "orchestrator": {"group_size": 8, "batch_groups": 4, "max_staleness": 0, "concurrency": 32,
                         "backend": "vllm", **orchestrator},
        "eval": {"suite": None},
        "max_steps": 2,
        "out": str(out),
        "logging": {"progress": False, "plots": False},
    }


def trainer_logprobs(model, prompt: list[int], out: list[int], temperature: float) -> list[float]:
    """log softmax(logits / T) of each sampled token, as the trainer recomputes them."""
    ids = torch.tensor([prompt + out])
    with torch.no_grad():
        logits = model.logits(ids)[0, len(prompt) - 1:-1].float() / temperature
    return logits.log_softmax(-1).gather(-1, torch.tensor(out)[:, None])[:, 0].tolist()
