"""Asynchronous vs synchronous training over seeds: what staleness costs per trained sample, and what it saves.

The same recipe, seed by seed, at orchestrator.max_staleness 0 (synchronous), 1, 2 and 4, for the same
number of trainer steps (so the same number of trained samples); every configuration in a fresh process,
one after the other (never two at once). Two recipes, both GRPO with the verifier run in a sandbox:

- `smollm2` (default): the default `temper train` recipe (SmolLM2-135M-Instruct, two-digit addition,
  base pass rate ~25%), with `sandbox=true` on the training and held-out suites. Its rollout and
  training phases are of similar length, which is where overlap has something to win.
- `toy`: a small random chat model learns to copy a digit (fast; for trying the benchmark out).

Per staleness s it reports the wall-clock per trained sample, the final held-out reward (mean over seeds,
with a bootstrap interval over seeds x tasks: seeds drawn with replacement, then tasks within each),
the paired difference against staleness 0 (per seed and task) with its interval, and what the trainer saw:
the mean |behaviour - trainer| logprob mismatch, the clipped-token fractions, the importance-masked
fraction, the staleness trained on and the samples kept after the zero-variance filter. From the
synchronous runs' phase times, the best overlap can give is bound = (rollout + train) / max(rollout,
train); `overlap_bound_fraction` is staleness 1's speed-up over it. The held-out set is scored once
before training (greedy decoding does not depend on the seed) and after every run.

    .venv/bin/python benchmarks/async_bench.py [--recipe smollm2|toy] [--seeds 3] [--staleness 0,1,2,4]
        [--arm LABEL:STALENESS:KEY=VALUE[,KEY=VALUE...] ...] [--steps N] [--eval-n N] [--no-sandbox]

`--arm` adds a configuration beside the plain ones: a max_staleness with `temper train --set` settings, e.g.
`--arm s4lr:4:algorithm.optim.staleness_lr=inverse`; its figures are keyed by its label (the plain ones' labels
are s0, s1, ...), and it is compared with the synchronous run of the same seed like the others.

Progress goes to stderr; writes benchmarks/results/async_bench/latest.json and a PNG beside it (training
reward against wall-clock, one line per staleness, the held-out result at each line's end); the last
line of stdout is the JSON.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRAINER_KEYS = {"mismatch": "trainer/mean_abs_logprob_mismatch", "clip_frac_high": "trainer/clip_frac_high",
                "clip_frac_low": "trainer/clip_frac_low", "is_masked_frac": "trainer/is_masked_frac",
                "mismatch_kl": "trainer/mismatch_kl", "lr_scale": "trainer/lr_scale"}


@dataclass(frozen=True)
class Arm:
    """One configuration: a label (s<staleness> for a plain one), its max_staleness and its extra settings."""

    label: str
    staleness: int
    sets: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "Arm":
        label, staleness, sets = [*text.split(":", 2), ""][:3]
        if not label or not staleness.isdigit():
            raise argparse.ArgumentTypeError(f"--arm {text!r}: expected LABEL:STALENESS[:KEY=VALUE,...]")
        return cls(label, int(staleness), tuple(x for x in sets.split(",") if x))


def arms_of(args: argparse.Namespace) -> list[Arm]:
    plain = [Arm(f"s{s}", s) for s in sorted({int(s) for s in args.staleness.split(",")})]
    return plain + list(args.arm)


def recipe_config(model: str, out: Path, arm: Arm, seed: int, args: argparse.Namespace,
                  before: bool) -> dict[str, Any]:
    from temper.config.loader import apply_overrides

    return apply_overrides(_recipe_config(model, out, arm.staleness, seed, args, before), list(arm.sets))


def _recipe_config(model: str, out: Path, staleness: int, seed: int, args: argparse.Namespace,
                   before: bool) -> dict[str, Any]:
    sandbox = "true" if args.sandbox else "false"
    common = {"max_steps": args.steps, "out": str(out), "logging": {"progress": False, "plots": False}}
    if args.recipe == "smollm2":  # the default recipe; only the sandboxed verifier, steps, eval size and seed change
        from temper.orchestrator.config import DEFAULT_EVAL_SUITE, DEFAULT_SUITE

        return {**common, "suites": [{"spec": f"{DEFAULT_SUITE},sandbox={sandbox}"}],
                "orchestrator": {"max_staleness": staleness, "save_every": args.steps},
                "eval": {"suite": f"{DEFAULT_EVAL_SUITE},sandbox={sandbox}", "n": args.eval_n, "before": before},
                "runtime": {"seed": seed}}
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
        "runtime": {"seed": seed, "threads": 1},
    }


def run(model: str, out: Path, arm: Arm, seed: int, args: argparse.Namespace, before: bool) -> dict[str, Any]:
    """One training run (in this process): its per-step rows, phase times and held-out scores."""
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    cfg = TrainConfig.from_recipe(recipe_config(model, out, arm, seed, args, before))
    t = time.monotonic()
    train(cfg, RunDir.create(cfg))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    after = json.loads((out / "eval_after.json").read_text())
    before_scores = json.loads((out / "eval_before.json").read_text())["scores"] if before else None
    loop, rollout = sum(r["step_s"] for r in rows), sum(r["batch_wait_s"] for r in rows)
    return {"arm": arm.label, "staleness": arm.staleness, "sets": list(arm.sets), "seed": seed,
            "loop_s": loop, "rollout_s": rollout, "train_s": loop - rollout,
            "wall_s": time.monotonic() - t, "after": {k: after[k] for k in ("n", "mean_reward", "ci_low", "ci_high")},
            "after_scores": after["scores"], "before_scores": before_scores,
            "samples": len(rows) * cfg.orchestrator.batch_groups * cfg.orchestrator.group_size,
            "kept": sum(r.get("trainer/kept_trajectories", 0) for r in rows),
            "max_staleness_seen": max(r["staleness_max"] for r in rows),
            "curve": [{"step": r["step"], "step_s": r["step_s"], "reward": r["reward"],
                       "staleness": r["staleness"], **{k: r.get(v) for k, v in TRAINER_KEYS.items()}} for r in rows]}


def run_in_process(model: str, tmp: Path, arm: Arm, seed: int, before: bool) -> dict[str, Any]:
    """Each configuration in a fresh process, so none inherits another's memory, threads or caches."""
    name = f"{arm.label}-seed{seed}"
    cmd = [sys.executable, __file__, *sys.argv[1:], "--worker", f"{arm.label},{seed},{int(before)}",
           "--worker-model", model, "--worker-dir", str(tmp)]
    subprocess.run(cmd, check=True)
    return json.loads((tmp / f"{name}.json").read_text())


def _mean(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def aggregate(runs: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """Per arm label s: reward_{s}_mean, diff_vs_sync_{s} (paired with s0's run of the same seed), ..."""
    from temper.evals.stats import clustered_bootstrap_mean

    by = {s: sorted((r for r in runs if r["arm"] == s), key=lambda r: r["seed"]) for s in labels}
    sync = {r["seed"]: r for r in by["s0"]}
    out: dict[str, Any] = {}
    for s in labels:
        clusters = [[v for v in r["after_scores"].values() if v is not None] for r in by[s]]
        ci = clustered_bootstrap_mean(clusters)
        out[f"reward_{s}_mean"] = round(ci.mean, 4)
        out[f"reward_{s}_ci"] = [round(ci.low, 4), round(ci.high, 4)]
        out[f"reward_{s}_per_seed"] = [r["after"]["mean_reward"] for r in by[s]]
        diffs = []
        for r in by[s]:
            base = sync[r["seed"]]["after_scores"]
            diffs.append([v - base[k] for k, v in r["after_scores"].items()
                          if v is not None and base.get(k) is not None])
        d = clustered_bootstrap_mean(diffs)
        out[f"diff_vs_sync_{s}"] = round(d.mean, 4)
        out[f"diff_vs_sync_{s}_ci"] = [round(d.low, 4), round(d.high, 4)]
        out[f"wallclock_per_sample_{s}"] = round(statistics.fmean(r["loop_s"] / r["samples"] for r in by[s]), 4)
        out[f"loop_{s}"] = round(statistics.fmean(r["loop_s"] for r in by[s]), 1)
        steps = [row for r in by[s] for row in r["curve"]]
        for k in TRAINER_KEYS:
            v = _mean([row[k] for row in steps])
            out[f"{k}_{s}"] = round(v, 5) if v is not None else None
        out[f"staleness_trained_{s}"] = round(statistics.fmean(row["staleness"] for row in steps), 3)
        out[f"kept_samples_{s}"] = round(statistics.fmean(r["kept"] for r in by[s]), 1)
    if "s1" in by:
        fractions, ratios = [], []
        for r in by["s1"]:
            base = sync[r["seed"]]
            bound = base["loop_s"] / max(base["rollout_s"], base["train_s"], 1e-9)
            ratio = base["loop_s"] / max(r["loop_s"], 1e-9)
            ratios.append(ratio)
            fractions.append(ratio / bound)
        out["async_vs_sync_wallclock_ratio"] = round(statistics.fmean(ratios), 3)
        out["overlap_bound_fraction"] = round(statistics.fmean(fractions), 3)
    return out


def plot(runs: list[dict[str, Any]], arms: list[Arm], path: Path) -> None:
    from temper.runtime import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, arm in enumerate(arms):
        mine = [r for r in runs if r["arm"] == arm.label]
        steps = min(len(r["curve"]) for r in mine)
        # the training loop's own clock (the sum of step times): the held-out evaluations are left out
        t = [statistics.fmean(sum(row["step_s"] for row in r["curve"][:j + 1]) for r in mine) for j in range(steps)]
        y = [statistics.fmean(r["curve"][j]["reward"] for r in mine) for j in range(steps)]
        color = f"C{i}"
        ax.plot(t, y, marker=".", color=color, label=f"{_describe(arm)}: batch reward (mean of {len(mine)} seeds)")
        held = statistics.fmean(r["after"]["mean_reward"] for r in mine)
        ax.scatter([t[-1]], [held], marker="*", s=160, color=color, edgecolor="black", zorder=3)
    ax.set_xlabel("wall-clock (s, training loop; same number of trained samples at each line's end)")
    ax.set_ylabel("reward")
    ax.set_title("Training reward by wall-clock; star = held-out reward after the run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def check_arms(ap: argparse.ArgumentParser, model: str, tmp: Path, arms: list[Arm], args: argparse.Namespace) -> None:
    """Every arm's settings validate before the first run (not in a worker an hour in)."""
    from pydantic import ValidationError

    from temper.errors import ConfigError
    from temper.orchestrator.config import TrainConfig

    for arm in arms:
        try:
            TrainConfig.from_recipe(recipe_config(model, tmp / arm.label, arm, 0, args, False))
        except (ConfigError, ValidationError) as e:
            ap.error(f"--arm {arm.label}: {' '.join(str(e).split())}")


def _describe(arm: Arm) -> str:
    return f"max_staleness {arm.staleness}" + "".join(f", {x}" for x in arm.sets)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", choices=["smollm2", "toy"], default="smollm2")
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per configuration (runtime.seed 0..N-1)")
    ap.add_argument("--staleness", default="0,1,2,4", help="comma-separated max_staleness values; 0 is required")
    ap.add_argument("--arm", type=Arm.parse, action="append", default=[], metavar="LABEL:STALENESS:KEY=VALUE,...",
                    help="a configuration beside the plain staleness ones (repeatable)")
    ap.add_argument("--steps", type=int, default=None, help="default: 8 (smollm2), 40 (toy)")
    ap.add_argument("--eval-n", type=int, default=None, help="held-out tasks; default: 200 (smollm2), 128 (toy)")
    ap.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/async_bench/latest.json")
    toy = ap.add_argument_group("toy recipe")
    toy.add_argument("--hidden", type=int, default=768)
    toy.add_argument("--layers", type=int, default=4)
    toy.add_argument("--group", type=int, default=8)
    toy.add_argument("--batch", type=int, default=4)
    toy.add_argument("--new-tokens", type=int, default=4)
    toy.add_argument("--digits", type=int, default=3)
    toy.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # "label,seed,before" of one run
    ap.add_argument("--worker-model", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    smollm2 = args.recipe == "smollm2"
    args.steps = args.steps or (8 if smollm2 else 40)
    args.eval_n = args.eval_n or (200 if smollm2 else 128)
    arms = arms_of(args)
    labels = [a.label for a in arms]
    if "s0" not in labels:
        ap.error("--staleness must include 0 (the synchronous baseline the others are compared with)")
    if len(set(labels)) != len(labels):
        ap.error(f"--arm: labels must differ from each other and from the plain ones ({', '.join(labels)})")

    import torch

    torch.set_num_threads(1)
    if args.worker is not None:
        label, seed, before = args.worker.split(",")
        arm = next(a for a in arms if a.label == label)
        name = f"{label}-seed{seed}"
        out = run(args.worker_model, Path(args.worker_dir) / name, arm, int(seed), args, bool(int(before)))
        (Path(args.worker_dir) / f"{name}.json").write_text(json.dumps(out))
        return
    from rich.console import Console

    console = Console(stderr=True)
    t0 = time.monotonic()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = "smollm2-135m"
        if not smollm2:
            from temper.models.toy import make_toy_model

            model = str(make_toy_model(Path(tmp) / "model", hidden=args.hidden, layers=args.layers))
        check_arms(ap, model, Path(tmp), arms, args)
        plan = [(seed, a) for seed in range(args.seeds) for a in arms]  # seeds outer: drift hits all alike
        for i, (seed, arm) in enumerate(plan):
            r = run_in_process(model, Path(tmp), arm, seed, before=i == 0)
            runs.append(r)
            console.print(f"[{i + 1}/{len(plan)}] {arm.label} ({_describe(arm)}) seed={seed}: loop {r['loop_s']:.0f}s "
                          f"(rollout wait {r['rollout_s']:.0f}s), held-out {r['after']['mean_reward']:.3f} "
                          f"[{r['after']['ci_low']:.3f}, {r['after']['ci_high']:.3f}], kept {r['kept']:.0f}/"
                          f"{r['samples']}, elapsed {(time.monotonic() - t0) / 60:.1f} min")
    before = next(r["before_scores"] for r in runs if r["before_scores"] is not None)
    scored = [v for v in before.values() if v is not None]
    result = {**aggregate(runs, labels), "base_reward": round(statistics.fmean(scored), 4),
              "recipe": args.recipe, "steps": args.steps, "seeds": args.seeds,
              "arms": {a.label: _describe(a) for a in arms},
              "eval_n": args.eval_n, "sandboxed_verifier": args.sandbox, "samples_per_run": runs[0]["samples"],
              "total_minutes": round((time.monotonic() - t0) / 60, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".runs.json").write_text(json.dumps(runs) + "\n")
    plot(runs, arms, args.out.with_suffix(".png"))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
