"""Asynchronous vs synchronous training on the same recipe and the same number of trained samples.

Two recipes, both GRPO with the verifier run in a sandbox, same seed, steps, batch and group size;
only orchestrator.max_staleness differs (0 = synchronous, 1 = asynchronous):

- `smollm2` (default): the default `temper train` recipe (SmolLM2-135M-Instruct, two-digit
  addition, base pass rate ~25%), with `sandbox=true` on the training and held-out suites. Its
  rollout and training phases are of similar length, which is where overlap has something to win.
- `toy`: a small random chat model learns to copy a digit; rollouts (sandboxed verifier, agent
  loop) dominate its steps, so the bound below is close to 1.

From the synchronous run's phase times (waiting for rollouts vs training + weight sync) the best
overlap can give is bound = (rollout + train) / max(rollout, train); on 2 cores overlap only wins
back idle time, so the target is >= 80% of that bound and >= 1.2x, with the final held-out reward
no worse beyond noise.

    .venv/bin/python benchmarks/async_bench.py [--recipe smollm2|toy] [--steps N] [--eval-n N]

Prints progress to stderr; the last line of stdout is JSON.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def recipe_config(model: str, out: Path, staleness: int, args: argparse.Namespace, before: bool) -> dict[str, Any]:
    sandbox = "true" if args.sandbox else "false"
    common = {"max_steps": args.steps, "out": str(out), "logging": {"progress": False, "plots": False}}
    if args.recipe == "smollm2":  # the default recipe; only the sandboxed verifier, steps and eval size change
        from temper.orchestrator.config import DEFAULT_EVAL_SUITE, DEFAULT_SUITE

        return {**common, "suites": [{"spec": f"{DEFAULT_SUITE},sandbox={sandbox}"}],
                "orchestrator": {"max_staleness": staleness, "save_every": args.steps},
                "eval": {"suite": f"{DEFAULT_EVAL_SUITE},sandbox={sandbox}", "n": args.eval_n, "before": before}}
    return {
        **common, "model": model,
        "suites": [{"spec": f"toy:n=256,seed=0,digits={args.digits},sandbox={sandbox}", "max_concurrency": 64}],
        "algorithm": {"optim": {"lr": args.lr, "total_steps": 10_000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 64_000_000, "max_num_seqs": 128},
        "agent": {"max_turn_tokens": args.new_tokens, "system_prompt": "say"},
        "orchestrator": {"group_size": args.group, "batch_groups": args.batch, "max_staleness": staleness,
                         "concurrency": 64, "save_every": args.steps, "max_refills": 0},
        "eval": {"suite": f"toy:n=128,seed=99,digits={args.digits},sandbox={sandbox}", "n": args.eval_n,
                 "before": before},
        "runtime": {"seed": 0, "threads": 1},
    }


def run(model: str, out: Path, staleness: int, args: argparse.Namespace, before: bool) -> dict[str, Any]:
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    cfg = TrainConfig.model_validate(recipe_config(model, out, staleness, args, before))
    t = time.monotonic()
    summary = train(cfg, RunDir.create(cfg))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    loop = sum(r["step_s"] for r in rows)
    rollout = sum(r["batch_wait_s"] for r in rows)
    print(f"max_staleness={staleness}: loop {loop:.1f}s (waiting for rollouts {rollout:.1f}s, training + sync "
          f"{loop - rollout:.1f}s), total {time.monotonic() - t:.1f}s, after {summary['after']}", file=sys.stderr)
    return {"loop_s": loop, "rollout_s": rollout, "train_s": loop - rollout, "summary": summary,
            "max_staleness_seen": max(r["staleness_max"] for r in rows),
            "consumed_samples": len(rows) * cfg.orchestrator.batch_groups * cfg.orchestrator.group_size,
            "batch": f"{cfg.orchestrator.batch_groups} groups x {cfg.orchestrator.group_size}",
            "kept_samples": sum(r.get("trainer/kept_trajectories", 0) for r in rows)}


def run_in_process(model: str, tmp: Path, staleness: int) -> dict[str, Any]:
    """Each side in a fresh process, so neither inherits the other's memory or threads."""
    side = "sync" if staleness == 0 else "async"
    cmd = [sys.executable, __file__, *sys.argv[1:], "--worker", str(staleness), "--worker-model", model,
           "--worker-dir", str(tmp)]
    subprocess.run(cmd, check=True)
    return json.loads((tmp / f"{side}.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", choices=["smollm2", "toy"], default="smollm2")
    ap.add_argument("--steps", type=int, default=None, help="default: 8 (smollm2), 40 (toy)")
    ap.add_argument("--eval-n", type=int, default=None, help="held-out tasks; default: 200 (smollm2), 128 (toy)")
    ap.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    toy = ap.add_argument_group("toy recipe")
    toy.add_argument("--hidden", type=int, default=768)
    toy.add_argument("--layers", type=int, default=4)
    toy.add_argument("--group", type=int, default=8)
    toy.add_argument("--batch", type=int, default=4)
    toy.add_argument("--new-tokens", type=int, default=4)
    toy.add_argument("--digits", type=int, default=3)
    toy.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)  # max_staleness of one side
    ap.add_argument("--worker-model", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    smollm2 = args.recipe == "smollm2"
    args.steps = args.steps or (8 if smollm2 else 40)
    args.eval_n = args.eval_n or (200 if smollm2 else 128)

    import torch

    torch.set_num_threads(1)
    if args.worker is not None:
        side = "sync" if args.worker == 0 else "async"
        out = run(args.worker_model, Path(args.worker_dir) / side, args.worker, args, before=args.worker == 0)
        (Path(args.worker_dir) / f"{side}.json").write_text(json.dumps(out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = "smollm2-135m"
        if not smollm2:
            from temper.models.toy import make_toy_model

            model = str(make_toy_model(Path(tmp) / "model", hidden=args.hidden, layers=args.layers))
        sync = run_in_process(model, Path(tmp), 0)
        asyn = run_in_process(model, Path(tmp), 1)
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
        "recipe": args.recipe, "steps": args.steps, "batch": sync["batch"], "sandboxed_verifier": args.sandbox,
        "target_bound_fraction_met": ratio / bound >= 0.8,
        "target_ratio_met": ratio >= 1.2,
        "target_reward_no_worse_met": a_after["mean_reward"] >= s_after["mean_reward"] - noise,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
