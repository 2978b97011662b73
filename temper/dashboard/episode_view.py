"""One stored episode as the dashboard draws it: the token stream cut into turns (model-sampled spans and
the prompt/observation spans between them), every token with its text, behaviour logprob, policy
version, loss mask and advantage; tool calls with their outputs; reward components; timings; the group.

The advantage is recomputed as the trainer computed it, from the rewards of the episode's group and the
run's `algorithm.advantages` (outcome estimators give one value per sequence, on its model tokens).
"""

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from temper.models.tokenizer import Tokenizer
from temper.rl.advantages import RunningBaseline, outcome_advantages
from temper.rl.config import AdvantageConfig


@lru_cache(maxsize=8)
def _tokenizer(folder: str) -> Tokenizer:
    return Tokenizer.from_folder(folder)


def run_tokenizer(run: Path, config: dict[str, Any]) -> Tokenizer | None:
    """The tokenizer of the run's policy: a checkpoint's (the run's own copy) or the configured model's."""
    candidates = [p / "model" for p in sorted((run / "checkpoints").glob("step_*"), reverse=True)]
    if config.get("model"):
        candidates.append(Path(str(config["model"])).expanduser())
    for folder in candidates:
        if (folder / "tokenizer.json").is_file():
            try:
                return _tokenizer(str(folder.resolve()))
            except Exception:  # a broken tokenizer file: try the next copy, else show ids
                continue
    if config.get("model"):  # a bundled model name (cached conversion, outside the run folder)
        try:
            from temper.models.registry import resolve_model

            return _tokenizer(str(resolve_model(str(config["model"]))))
        except Exception:
            return None
    return None


def advantage(config: dict[str, Any], group: list[dict[str, Any]], episode_id: str) -> float | None:
    """The episode's outcome advantage among the group's scored samples; None when it had none."""
    # a store written before rewards had to be finite may hold a NaN: that sample has no advantage to show
    scored = [g for g in group if g["reward"] is not None and g["failure"] is None and math.isfinite(g["reward"])]
    ids = [g["id"] for g in scored]
    if episode_id not in ids:
        return None
    adv_cfg = AdvantageConfig.model_validate((config.get("algorithm") or {}).get("advantages") or {})
    if adv_cfg.estimator in ("gae", "reinforce"):  # per-token critic values / a running baseline: not recoverable
        return None
    rewards = torch.tensor([float(g["reward"]) for g in scored])
    adv = outcome_advantages(rewards, [list(range(len(scored)))], adv_cfg, RunningBaseline())
    return float(adv[ids.index(episode_id)])


def spans(traj: dict[str, Any], tok: Tokenizer | None, adv: float | None) -> list[dict[str, Any]]:
    """Consecutive tokens of one kind (model-sampled or context) as one span, each token drawn on its own."""
    out: list[dict[str, Any]] = []
    for i, tid in enumerate(traj["token_ids"]):
        mask = traj["loss_mask"][i]
        text = tok.decode([tid], skip_special_tokens=False) if tok is not None else f"[{tid}]"
        token = {"text": text, "id": tid, "mask": mask, "logprob": round(traj["logprobs"][i], 4),
                 "version": traj["versions"][i], "adv": round(adv, 4) if (mask and adv is not None) else None}
        if out and out[-1]["model"] == bool(mask):
            out[-1]["tokens"].append(token)
        else:
            out.append({"model": bool(mask), "tokens": [token]})
    for s in out:
        s["text"] = "".join(t["text"] for t in s["tokens"])
        versions = sorted({t["version"] for t in s["tokens"] if t["mask"]})
        s["versions"] = versions
    return out
