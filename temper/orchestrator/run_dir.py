"""The run folder: resolved config, metrics JSONL, store, checkpoints, audit log, plots, summary.

    RUN_DIR/config.yaml        the resolved TrainConfig (resume reads it back)
    RUN_DIR/metrics.jsonl      one JSON object per trainer step
    RUN_DIR/audit.jsonl        what happened: start, resume, evaluations, quarantines, worker deaths
    RUN_DIR/store.sqlite       trajectories and consumption marks (store.py)
    RUN_DIR/checkpoints/       trainer checkpoints (step_NNNNNN/, latest)
    RUN_DIR/eval_before.json, eval_after.json, summary.json, summary.md, plots/*.png
"""

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import yaml

from temper.errors import TemperError
from temper.orchestrator.config import TrainConfig


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        self.checkpoints = path / "checkpoints"
        self.store = path / "store.sqlite"
        self.plots = path / "plots"

    @classmethod
    def create(cls, cfg: TrainConfig) -> "RunDir":
        path = Path(cfg.out or f"runs/train-{time.strftime('%Y%m%d-%H%M%S')}")
        if (path / "store.sqlite").exists():
            raise TemperError(f"{path}: already holds a run; continue it with --resume {path} or pick another --out")
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path)
        cfg.out = str(path)
        (path / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        return run

    @classmethod
    def open(cls, path: str | Path) -> tuple["RunDir", dict[str, Any]]:
        path = Path(path)
        if not path.is_dir():
            raise TemperError(f"--resume {path}: no such run folder")
        if not (path / "config.yaml").is_file():
            raise TemperError(f"--resume {path}: not a temper train run folder (no config.yaml)")
        return cls(path), yaml.safe_load((path / "config.yaml").read_text()) or {}

    def log_metrics(self, row: dict[str, Any]) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")

    def metrics(self) -> list[dict[str, Any]]:
        p = self.path / "metrics.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []

    def audit(self, kind: str, **data: Any) -> None:
        with open(self.path / "audit.jsonl", "a") as f:
            f.write(json.dumps({"time": time.time(), "kind": kind, **data}, default=str) + "\n")

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        tmp.replace(self.path / name)

    def read_json(self, name: str) -> Any:
        p = self.path / name
        return json.loads(p.read_text()) if p.exists() else None


def writer_identity() -> dict[str, Any]:
    """Who writes the run (the audit log's start and resume lines): `temper dashboard` tells running from crashed."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# temper train: {summary['run']}", "",
             f"model `{summary['model']}`, suites {', '.join(f'`{s}`' for s in summary['suites'])}, "
             f"{summary['steps']} steps in {summary['wall_s'] / 60:.1f} min "
             f"(backend {summary['backend']}, max_staleness {summary['max_staleness']}).", ""]
    b, a, d = summary.get("before"), summary.get("after"), summary.get("difference")
    if b or a:
        lines += [f"Held-out evaluation: `{summary['eval_suite']}`, correctness only, greedy, 95% bootstrap CIs.", "",
                  "| | n | mean reward | 95% CI |", "|---|---:|---:|---|"]
        for name, r in (("before", b), ("after", a)):
            if r and r["n"]:  # n = 0: every episode failed (no mean to show)
                ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                lines.append(f"| {name} | {r['n']} | {r['mean_reward']:.3f} | {ci} |")
        if d and d["diff"] is not None:  # temper.evals.compare.difference
            lines += ["", f"Difference (after - before, {d['method']} bootstrap, {d['paired']} tasks scored in both): "
                      f"{d['diff']:+.3f}, 95% CI [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] ({d['change']})."]
    t = summary.get("training", {})
    if t:
        lines += ["", "| training | value |", "|---|---:|"]
        lines += [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in t.items()]
    if summary.get("quarantined"):
        lines += ["", "Quarantined tasks (infrastructure failures after retries):", ""]
        lines += [f"- `{q['task_id']}` ({q['domain']}): {q['kind']} x{q['attempts']}: {q['message'][:120]}"
                  for q in summary["quarantined"]]
    lines += ["", "Plots: " + ", ".join(f"[{p}](plots/{p})" for p in ("reward.png", "throughput.png",
                                                                     "staleness.png")), ""]
    return "\n".join(lines)
