"""Trainer checkpoints: atomic, resumable bit for bit, with retention.

<root>/step_000012/
    model/        Hugging Face folder of the policy (LoRA merged): what the engine or `serve` loads
    trainer.pt    optimizer, LR scheduler, RNG states, step, policy version, data cursor, baseline,
                  value head, LoRA adapters (unmerged: resuming needs them apart from the base)
    meta.json     step, version, metrics (written last); world_size when written by FSDP ranks
<root>/latest     the name of the newest complete checkpoint

Written by N FSDP ranks (`algorithm.trainer.world_size`), trainer.pt is replaced by
    dcp/          torch.distributed.checkpoint: model + optimizer shards, one __<rank>_0.distcp per rank, and
                  `trainer` (the rest of what trainer.pt holds, one blob); .metadata lets any world size load it
model/ is the same full HF folder in both layouts (rank 0 writes it from the gathered weights).

A checkpoint is written into a hidden temporary folder and renamed into place, so a crash leaves
either the previous state or the complete new one; folders without meta.json are never loaded.
"""

import copy as copy_module
import io
import json
import os
import random
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from temper.errors import TemperError
from temper.rl import distributed as dist
from temper.rl.lora import has_lora

STEP_DIR = re.compile(r"^step_(\d+)$")
SHARDS = "dcp"  # the sharded layout's folder (torch.distributed.checkpoint)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _trainer_state(trainer, rng: dict[str, Any] | None) -> dict[str, Any]:
    """Everything but the model and optimizer tensors (the same in both layouts)."""
    return {
        "scheduler": trainer.lr_scheduler.state_dict(),
        "rng": rng if rng is not None else rng_state(),
        "step": trainer.step_count,
        "policy_version": trainer.policy_version,
        "data_cursor": trainer.data_cursor,
        "baseline": trainer.baseline.state_dict(),
        "value_head": trainer.critic.state_dict() if trainer.critic is not None else None,
        "lora": {k: v for k, v in trainer.model.state_dict().items() if "lora_" in k}
        if has_lora(trainer.model) else None,
    }


def _set_trainer_state(trainer, state: dict[str, Any]) -> None:
    trainer.lr_scheduler.load_state_dict(state["scheduler"])
    if trainer.critic is not None and state["value_head"] is not None:
        trainer.critic.load_state_dict(state["value_head"])
    trainer.baseline.load_state_dict(state["baseline"])
    trainer.step_count = state["step"]
    trainer.policy_version = state["policy_version"]
    trainer.data_cursor = state["data_cursor"]


@dataclass(frozen=True)
class CheckpointSnapshot:
    """One process's checkpoint, copied out of the live trainer: `write_snapshot` writes it (on another
    thread, while the trainer takes its next step: `orchestrator.async_checkpoints`)."""

    name: str  # step_NNNNNN
    model_config: Any
    policy: dict[str, torch.Tensor]  # the model folder's weights (LoRA merged)
    state: dict[str, Any]  # trainer.pt: the trainer's state and the optimizer's
    meta: dict[str, Any]
    retention: Any  # CheckpointConfig: what to keep after the write


def snapshot_checkpoint(trainer, metrics: dict[str, float], rng: dict[str, Any] | None = None,
                        policy: dict[str, torch.Tensor] | None = None, copy: bool = True) -> CheckpointSnapshot:
    """What save_trainer_checkpoint writes for one process. `copy`: of every tensor and value, so the trainer
    may go on training while it is written (costs one copy of weights and optimizer state in memory)."""
    state = {**_trainer_state(trainer, rng), "optimizer": trainer.optimizer.state_dict()}
    return CheckpointSnapshot(_step_name(trainer), trainer.model.config,
                              # policy_state_dict is already a copy (detached clones, or merged LoRA)
                              policy if policy is not None else trainer.policy_state_dict(),
                              copy_module.deepcopy(state) if copy else state, _meta(trainer, dict(metrics)),
                              trainer.cfg.checkpoint)


def write_snapshot(snap: CheckpointSnapshot, root: Path, tokenizer: Any = None) -> Path:
    """Write a snapshot atomically (a temporary folder, fsynced, renamed into place), point `latest` at it
    and apply retention; returns the checkpoint's folder."""
    tmp = _fresh_tmp(root, snap.name)
    try:
        tmp.mkdir()
        torch.save(snap.state, tmp / "trainer.pt")
        _write_model_and_meta(tmp, snap.model_config, snap.policy, tokenizer, snap.meta)  # meta.json last
        return _publish(tmp, root, snap.name, snap.retention)
    except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as a RuntimeError (iostream error)
        shutil.rmtree(tmp, ignore_errors=True)  # the space a partial write took goes back
        free = shutil.disk_usage(root).free / 2**30
        raise TemperError(f"{root}: writing checkpoint {snap.name} failed ({exc}); {free:.1f} GiB free there "
                          f"(a checkpoint is weights and optimizer state, ~12 bytes per parameter)") from exc


def save_trainer_checkpoint(trainer, root: Path, metrics: dict[str, float], tokenizer: Any = None,
                            rng: dict[str, Any] | None = None, policy: dict[str, torch.Tensor] | None = None) -> Path:
    """One process: trainer.pt holds the optimizer; FSDP ranks: dcp/ holds model + optimizer shards (every rank
    writes its own). `rng`: the RNG state to record (None: this process's; a rank records its driver's).
    `policy`: the full weights of this very version, already gathered (ranks must all pass one or all not)."""
    if not dist.is_distributed():
        return write_snapshot(snapshot_checkpoint(trainer, metrics, rng, policy, copy=False), root, tokenizer)
    name = _step_name(trainer)
    if policy is None:
        policy = trainer.policy_state_dict()  # collective under FSDP: every rank calls it
    tmp = _fresh_tmp(root, name) if dist.rank() == 0 else root / f".tmp-{name}"
    tmp = _save_shards(trainer, tmp, _trainer_state(trainer, rng))
    if dist.rank() == 0:
        meta = {**_meta(trainer, metrics), "world_size": dist.world_size()}
        _write_model_and_meta(tmp, trainer.model.config, policy, tokenizer, meta)
        _publish(tmp, root, name, trainer.cfg.checkpoint)
    torch.distributed.barrier()
    return root / name


def _step_name(trainer) -> str:
    return f"step_{trainer.step_count:06d}"


def _meta(trainer, metrics: dict[str, float]) -> dict[str, Any]:
    """meta.json: the step, the policy version and the step's metrics."""
    return {"step": trainer.step_count, "policy_version": trainer.policy_version, "metrics": metrics}


def _fresh_tmp(root: Path, name: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def _write_model_and_meta(tmp: Path, model_config: Any, policy: dict[str, torch.Tensor], tokenizer: Any,
                          meta: dict[str, Any]) -> None:
    from temper.models.loading import save_model

    # what save_model needs of a model (config + state_dict), for a state dict we already hold
    save_model(SimpleNamespace(config=model_config, state_dict=lambda: policy), tokenizer, tmp / "model")
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def _publish(tmp: Path, root: Path, name: str, retention: Any) -> Path:
    """fsync the temporary folder, rename it into place, point `latest` at it, apply retention."""
    _fsync_tree(tmp)
    final = root / name
    if final.exists():  # re-saving the same step: move the old one aside first
        old = root / f".old-{name}-{os.getpid()}"
        final.rename(old)
        shutil.rmtree(old)
    tmp.rename(final)
    latest_tmp = root / f".latest-{os.getpid()}"
    latest_tmp.write_text(name + "\n")
    os.replace(latest_tmp, root / "latest")
    _retain(root, retention)
    return final


def _save_shards(trainer, tmp: Path, state: dict[str, Any]) -> Path:
    """DCP save into rank 0's temporary folder: each rank writes its shards of model and optimizer
    (__<rank>_0.distcp), rank 0 the metadata and the trainer state (one pickled blob)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    box = [str(tmp)]
    torch.distributed.broadcast_object_list(box, src=0)  # every rank writes into rank 0's folder
    tmp = Path(box[0])
    model, optim = get_state_dict(trainer.model, trainer.optimizer)
    blob = io.BytesIO()
    torch.save(state, blob)
    dcp.save({"model": model, "optim": optim, "trainer": blob}, checkpoint_id=str(tmp / SHARDS))
    return tmp


def _load_shards(trainer, ckpt: Path) -> dict[str, Any]:
    """DCP load, resharded to this run's ranks (or one process); returns the trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, optim = get_state_dict(trainer.model, trainer.optimizer)  # the layout to load into
    target = {"model": model, "optim": optim, "trainer": io.BytesIO()}
    with warnings.catch_warnings():  # loading shards into one process is meant (a resume with world_size 1)
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.load(target, checkpoint_id=str(ckpt / SHARDS))
    set_state_dict(trainer.model, trainer.optimizer, model_state_dict=target["model"],
                   optim_state_dict=target["optim"])
    target["trainer"].seek(0)
    return torch.load(target["trainer"], weights_only=False)


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under root, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if STEP_DIR.match(p.name) and (p / "meta.json").is_file()]
    return sorted(found, key=lambda p: int(STEP_DIR.match(p.name).group(1)))


def _retain(root: Path, cfg) -> None:
    """Keep the last `keep_last` checkpoints and, if asked, the best by `best_metric`."""
    ckpts = list_checkpoints(root)
    keep = set(ckpts[-cfg.keep_last:]) if cfg.keep_last > 0 else set()
    if cfg.keep_best:
        scored = []
        for p in ckpts:
            value = json.loads((p / "meta.json").read_text()).get("metrics", {}).get(cfg.best_metric)
            if value is not None:
                scored.append((value if cfg.best_mode == "max" else -value, -int(STEP_DIR.match(p.name).group(1)), p))
        if scored:
            keep.add(max(scored)[2])  # ties go to the earliest
    for p in ckpts:
        if p not in keep:
            shutil.rmtree(p)
    for p in root.iterdir():  # temporaries of crashed writers
        if p.name.startswith((".tmp-", ".old-")) and not p.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(p, ignore_errors=True)


def resolve_checkpoint(path: Path) -> Path:
    """A step folder as is; a run folder -> its newest complete checkpoint."""
    if (path / "meta.json").is_file():
        return path
    named = path / "latest"
    if named.is_file():
        candidate = path / named.read_text().strip()
        if (candidate / "meta.json").is_file():
            return candidate
    ckpts = list_checkpoints(path)
    if not ckpts:
        raise TemperError(f"{path}: no complete checkpoint (expected step_NNNNNN/meta.json)")
    return ckpts[-1]


def load_trainer_checkpoint(trainer, path: Path) -> tuple[Path, dict[str, Any]]:
    """Load either layout into this trainer (one process or FSDP ranks); returns the checkpoint and the RNG
    state it recorded (already applied to this process)."""
    from temper.models.checkpoint import load_state_dict

    ckpt = resolve_checkpoint(path)
    if (ckpt / SHARDS).is_dir():
        state = _load_shards(trainer, ckpt)
        if state["lora"] is not None:
            trainer.model.load_state_dict(state["lora"], strict=False)
        _set_trainer_state(trainer, state)
        set_rng_state(state["rng"])
        return ckpt, state["rng"]
    state = torch.load(ckpt / "trainer.pt", weights_only=False)
    if state["lora"] is not None:
        trainer.model.load_state_dict(state["lora"], strict=False)
    else:
        weights = load_state_dict(ckpt / "model")
        if trainer.model.config.tie_word_embeddings:
            weights.setdefault("lm_head.weight", weights["model.embed_tokens.weight"])
        if dist.is_distributed():
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

            set_model_state_dict(trainer.model, weights, options=StateDictOptions(full_state_dict=True))
        else:
            missing, unexpected = trainer.model.load_state_dict(weights, strict=False)
            missing = [k for k in missing if "rotary" not in k]
            if missing or unexpected:
                raise TemperError(f"{ckpt}/model: weights do not match the model ({(missing or unexpected)[:3]})")
    if dist.is_distributed():
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(trainer.model, trainer.optimizer, state["optimizer"],
                                 options=StateDictOptions(full_state_dict=True))
    else:
        trainer.optimizer.load_state_dict(state["optimizer"])
    _set_trainer_state(trainer, state)
    set_rng_state(state["rng"])
    return ckpt, state["rng"]
