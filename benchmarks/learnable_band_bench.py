"""Fewer wasted rollouts: the default job trained on its learnable band against the default job, seed by seed.

    .venv/bin/python benchmarks/learnable_band_bench.py [--seeds 0,1,2] [--staleness 1,0] [--limit 600]
        [--default-from WORK]

The default job drops every group whose 8 rewards are equal (no GRPO signal) and samples another in its
place: about half of the episodes it generates are thrown away. The learnable band is the training tasks
the base model passes 1 to 7 times in 8, found once per model and suite by `temper envqa` (the QA pass:
examples/envqa/default-job.yaml, sampling the way `temper train` samples) and trained on through the
manifest it writes (`suites=[{spec: manifest:path=...}]`).

1. The QA pass over the first `--limit` training tasks, timed and reported apart (its episodes are a
   one-off cost, shared by every run on this model and suite).
2. Per seed and staleness: `temper train` on the band and on the default suite (or, with --default-from,
   the default runs of a `main_job_bench.py --work WORK` folder of the same commit, seeds and staleness),
   each scored by `temper eval` on the held-out set like main_job_bench does.

Reports per side: episodes generated and trained and their ratio, training minutes (first step to last),
held-out gain over the base model (paired over every (seed, task)) and gain per minute, and the band's
difference from the default, paired. Run it alone. Writes benchmarks/results/learnable_band_bench/latest.json
and a PNG beside it; the last line of stdout is the JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import main_job_bench as mjb  # its train, eval and pairing helpers: the same commands, scored alike

EXAMPLE = mjb.ROOT / "examples" / "envqa" / "default-job.yaml"
OUT = Path(__file__).parent / "results" / "learnable_band_bench"


def qa_pass(out: Path, limit: int) -> dict[str, Any]:
    if not (out / "manifest.json").exists():
        mjb.run([str(mjb.ROOT / ".venv/bin/temper"), "envqa", "--config", str(EXAMPLE), "--limit", str(limit),
                 "--out", str(out)], stdout=subprocess.DEVNULL)
    report = json.loads((out / "report.json").read_text())
    kept = json.loads((out / "manifest.json").read_text())["tasks"]
    passes = [t["passes"] for t in report["tasks"] if t.get("samples")]
    return {"tasks_checked": len(report["tasks"]), "tasks_kept": len(kept),
        "episodes": sum(t["samples"] for t in report["tasks"] if t.get("samples")),
        "minutes": round(report["summary"]["wall_s"] / 60, 2), "counts": report["summary"]["counts"],
        "passes_histogram": [passes.count(k) for k in range(9)]}


def side(runs: list[dict[str, Any]], before: dict[str, float | None], after: dict[str, float | None]) -> dict:
    d = mjb.gain(before, after)
    minutes = statistics.fmean(r["train_s"] for r in runs) / 60
    generated = statistics.fmean(r["samples_generated"] for r in runs)
    trained = statistics.fmean(r["samples_trained"] for r in runs)
    return {"gain": d["diff"], "gain_ci": [d["ci_low"], d["ci_high"]], "paired_n": d["paired"],
            "train_min": round(minutes, 2), "gain_per_min": round(d["diff"] / minutes, 4),
            "train_min_per_seed": [round(r["train_s"] / 60, 2) for r in runs],
            "episodes_generated": generated, "episodes_trained": trained,
            "generated_per_trained": round(generated / trained, 3),
            "rollout_wait_min": round(statistics.fmean(r["rollout_wait_s"] for r in runs) / 60, 2),
            "trainer_min": round(statistics.fmean(r["trainer_s"] for r in runs) / 60, 2)}


def plot(result: dict[str, Any], path: Path) -> None:
    """Episodes generated per trained and held-out gain (paired 95% CI), default and band, per staleness."""
    from temper.runtime import pyplot

    plt = pyplot()
    sides = [k for k in result if k.startswith(("default_s", "band_s"))]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for i, k in enumerate(sides):
        r = result[k]
        a.bar([i], [r["generated_per_trained"]], color=f"C{i}")
        b.errorbar([i], [r["gain"]], yerr=[[r["gain"] - r["gain_ci"][0]], [r["gain_ci"][1] - r["gain"]]], fmt="o",
                   capsize=6, color=f"C{i}")
    a.axhline(1, color="black", lw=0.8)
    for ax, title in ((a, "episodes generated per episode trained"), (b, "held-out gain (paired 95% CI)")):
        ax.set_xticks(range(len(sides)), sides)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    fig.suptitle(f"the learnable band against the default job ({len(result['seeds'])} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--staleness", default="1,0")
    ap.add_argument("--limit", type=int, default=600, help="training tasks the QA pass checks")
    ap.add_argument("--default-from", type=Path, default=None, help="a main_job_bench --work folder to take the "
                    "default side's runs and the base model's scores from (same commit, seeds and staleness)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=OUT / "latest.json")
    args = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(0, str(mjb.ROOT))
    from temper.envs import parse_spec
    from temper.models.registry import resolve_model
    from temper.orchestrator.train import resolve_train_config

    cfg = resolve_train_config(None, [], {}, None, create=False)[0]
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"learnable_band_bench-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    seeds, staleness = [int(x) for x in args.seeds.split(",")], [int(x) for x in args.staleness.split(",")]
    agent = mjb.eval_agent(cfg)
    limit = mjb.first_distinct([t.id for t in parse_spec(cfg.eval.suite).tasks()], cfg.eval.n)

    def evaluate(model: str, out: Path) -> dict[str, float | None]:  # an evaluation already in WORK is read
        if (out / "suites").exists():
            return mjb.eval_scores(out)
        return mjb.temper_eval(model, out, cfg.eval.suite, limit, agent)

    base = args.default_from or work
    before_one = evaluate(str(resolve_model(cfg.model)), base / "eval-before")
    mjb.log("QA pass: the learnable band of the training tasks")
    qa = qa_pass(work / "band-qa", args.limit)
    band_spec = f"suites=[{{spec: 'manifest:path={work / 'band-qa' / 'manifest.json'}'}}]"
    runs: dict[str, dict[int, list[dict]]] = {"default": {s: [] for s in staleness}, "band": {s: [] for s in staleness}}
    scores: dict[str, dict[int, dict[str, float | None]]] = {k: {s: {} for s in staleness} for k in runs}
    before: dict[str, float | None] = {}
    for seed in seeds:
        before |= {f"{seed}/{k}": v for k, v in before_one.items()}
        for st in staleness:
            for name, sets in (("band", [band_spec]), ("default", [])):
                folder = (base if name == "default" else work) / f"seed{seed}"
                run_dir = folder / (f"temper-s{st}" if name == "default" else f"band-s{st}")
                if not (run_dir / "metrics.jsonl").exists():
                    mjb.log(f"seed {seed}: temper train ({name}), max_staleness {st}")
                    mjb.temper_train(run_dir, st, cfg.max_steps, seed, sets)
                r = mjb.temper_run_record(run_dir, st)
                runs[name][st].append(r)
                got = evaluate(r["model"], folder / (f"eval-temper-s{st}" if name == "default" else f"eval-band-s{st}"))
                scores[name][st] |= {f"{seed}/{k}": v for k, v in got.items()}
    result: dict[str, Any] = {"qa_pass": qa, "seeds": seeds, "heldout_n": len(before_one)}
    for st in staleness:
        d, b = side(runs["default"][st], before, scores["default"][st]), side(runs["band"][st], before,
                                                                              scores["band"][st])
        diff = mjb.gain(scores["default"][st], scores["band"][st])
        result[f"default_s{st}"], result[f"band_s{st}"] = d, b
        result[f"band_minus_default_s{st}"] = {"diff": diff["diff"], "ci": [diff["ci_low"], diff["ci_high"]]}
        result[f"gain_per_min_ratio_s{st}"] = round(b["gain_per_min"] / d["gain_per_min"], 3)
    result["commit"] = mjb.commit()
    result["date"] = time.strftime("%Y-%m-%d")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
