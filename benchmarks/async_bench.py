"""Asynchronous vs synchronous training on the same recipe and the same number of trained samples.

The recipe: a small random chat model learns to copy a digit (`toy` suite, verifier run in a
sandbox), GRPO, same seed, steps, batch and group size; only orchestrator.max_staleness differs
(0 = synchronous, 1 = asynchronous). From the synchronous run's phase times (waiting for rollouts
vs training + weight sync) the best overlap can give is bound = (rollout + train) / max(rollout,
train); on 2 cores overlap only wins back idle time, so the target is >= 80% of that bound and
>= 1.2x, with the final held-out reward no worse beyond noise.

    .venv/bin/python benchmarks/async_bench.py [--steps 40] [--hidden 256] [--layers 4]

Prints progress to stderr; the last line of stdout is JSON.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run(model: Path, out: Path, staleness: int, args: argparse.Namespace, before: bool) -> dict[str, Any]:
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    sandbox = "true" if args.sandbox else "false"
    cfg = TrainConfig.model_validate({
        "model": str(model),
        "suites": [{"spec": f"toy:n=256,seed=0,digits={args.digits},sandbox={sandbox}", "max_concurrency": 64}],
        "algorithm": {"optim": {"lr": args.lr, "total_steps": 10_000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 64_000_000, "max_num_seqs": 128},
        "agent": {"max_new_tokens": args.new_tokens, "system_prompt": "say"},
        "orchestrator": {"group_size": args.group, "batch_groups": args.batch, "max_staleness": staleness,
                         "concurrency": 64, "save_every": args.steps, "max_refills": 0},
        "eval": {"suite": f"toy:n=128,seed=99,digits={args.digits},sandbox={sandbox}", "n": args.eval_n,
                 "before": before},
        "max_steps": args.steps, "out": str(out), "runtime": {"seed": 0, "threads": 1},
        "logging": {"progress": False, "plots": False},
    })
    t = time.monotonic()
    summary = train(cfg, RunDir.create(cfg))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    loop = sum(r["step_s"] for r in rows)
    rollout = sum(r["batch_wait_s"] for r in rows)
    print(f"max_staleness={staleness}: loop {loop:.1f}s (waiting for rollouts {rollout:.1f}s, training + sync "
          f"{loop - rollout:.1f}s), total {time.monotonic() - t:.1f}s, after {summary['after']}", file=sys.stderr)
    return {"loop_s": loop, "rollout_s": rollout, "train_s": loop - rollout, "summary": summary,
            "max_staleness_seen": max(r["staleness_max"] for r in rows),
            "consumed_samples": len(rows) * args.batch * args.group,
            "kept_samples": sum(r.get("trainer/kept_trajectories", 0) for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=4)
    ap.add_argument("--digits", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-n", type=int, default=128)
    ap.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from temper.orchestrator.toy_model import make_toy_model

    with tempfile.TemporaryDirectory() as tmp:
        model = make_toy_model(Path(tmp) / "model", hidden=args.hidden, layers=args.layers)
        sync = run(model, Path(tmp) / "sync", 0, args, before=True)
        asyn = run(model, Path(tmp) / "async", 1, args, before=False)
    r, tr = sync["rollout_s"], sync["train_s"]
    bound = (r + tr) / max(r, tr, 1e-9)
    ratio = sync["loop_s"] / max(asyn["loop_s"], 1e-9)
    s_after, a_after = sync["summary"]["after"], asyn["summary"]["after"]
    noise = max(s_after["mean_reward"] - s_after["ci_low"], a_after["ci_high"] - a_after["mean_reward"])
    result = {
        "async_vs_sync_wallclock_ratio": round(ratio, 3),
        "overlap_bound": round(bound, 3),
        "overlap_bound_fraction": round(ratio / bound, 3),
        "sync_final_reward": s_after["mean_reward"],
        "async_final_reward": a_after["mean_reward"],
        "sync_final_reward_ci": [s_after["ci_low"], s_after["ci_high"]],
        "async_final_reward_ci": [a_after["ci_low"], a_after["ci_high"]],
        "base_reward": sync["summary"]["before"]["mean_reward"],
        "sync_loop_s": round(sync["loop_s"], 2), "async_loop_s": round(asyn["loop_s"], 2),
        "sync_rollout_wait_s": round(r, 2), "sync_train_s": round(tr, 2),
        "async_max_staleness_seen": asyn["max_staleness_seen"],
        "trained_samples": {"sync": sync["consumed_samples"], "async": asyn["consumed_samples"]},
        "kept_after_filter": {"sync": sync["kept_samples"], "async": asyn["kept_samples"]},
        "steps": args.steps, "batch": f"{args.batch} groups x {args.group}", "sandboxed_verifier": args.sandbox,
        "target_bound_fraction_met": ratio / bound >= 0.8,
        "target_ratio_met": ratio >= 1.2,
        "target_reward_no_worse_met": a_after["mean_reward"] >= s_after["mean_reward"] - noise,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
