"""Helpers of the orchestrator tests: the tiny recipe config and a runner."""

import sqlite3
from pathlib import Path
from typing import Any


def tiny_config(model: Path, out: Path, **over: Any) -> dict[str, Any]:
    """The tiny recipe as a TrainConfig dict; `over` replaces top-level sections/keys (dotted keys
    like orchestrator__max_staleness set one field)."""
    cfg: dict[str, Any] = {
        "model": str(model),
        "suites": [{"spec": "toy:n=64,seed=0,digits=2"}],
        "algorithm": {"optim": {"lr": 0.03, "total_steps": 1000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 16_000_000, "max_num_seqs": 64},
        "agent": {"max_turn_tokens": 1, "system_prompt": "say"},
        "orchestrator": {"group_size": 8, "batch_groups": 4, "max_staleness": 1, "concurrency": 32},
        "eval": {"suite": "toy:n=64,seed=99,digits=2", "n": 64},
        "max_steps": 30,
        "out": str(out),
        "logging": {"progress": False, "plots": False},
    }
    for key, value in over.items():
        node = cfg
        *path, last = key.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
    return cfg


def run_tiny(model: Path, out: Path, **over: Any) -> dict[str, Any]:
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    cfg = TrainConfig.from_recipe(tiny_config(model, out, **over))
    return train(cfg, RunDir.create(cfg))


def metrics(out: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def snapshot(db_path: Path) -> dict[str, tuple[str, int | None]]:
    """The run store's trajectories: id -> (status, consumed step)."""
    db = sqlite3.connect(db_path)
    try:
        return {i: (s, c) for i, s, c in db.execute("SELECT id, status, consumed_step FROM trajectories")}
    finally:
        db.close()
