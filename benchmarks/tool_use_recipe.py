"""The tool-use recipe of docs/train.md, both stages, timed: SFT warm start, then GRPO with the calculator tool.

    .venv/bin/python benchmarks/tool_use_recipe.py            # the whole recipe (~20 min on 2 cores)
    .venv/bin/python benchmarks/tool_use_recipe.py --steps 1 --eval-n 4 --batch-groups 1   # a smoke run

Stage 1 writes 16 transcripts and runs `temper sft` (examples/tool_use/sft.yaml); stage 2 runs `temper train`
(examples/train/tool-use.yaml) from that warm start. Reported: held-out reward before and after with 95% CIs,
the paired difference, the rate of correct tool calls, the wall time of each stage and the peak RSS of the
largest process. Writes benchmarks/results/tool_use_recipe/latest.json (the last line of stdout too), the
run's metrics beside it (latest.metrics.jsonl) and the batch reward per step (latest.png). Run it alone.
"""

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(cmd: list[str]) -> tuple[str, float]:
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    return out, time.perf_counter() - t0


def tool_calls(run_dir: Path, which: str) -> dict | None:
    for summary in sorted((run_dir / "eval").glob(f"{which}*/summary.json")):
        suites = json.loads(summary.read_text())["suites"]
        return next(iter(suites.values())).get("tool_calls")
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="default: the recipe's (8)")
    ap.add_argument("--eval-n", type=int, default=None, help="default: the recipe's (100)")
    ap.add_argument("--batch-groups", type=int, default=None, help="default: the recipe's (4)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/tool_use_recipe")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tool-use-bench-"))  # kept when something fails, for a look
    rows, result = measure(args, work)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plot(rows, args.out / "latest.png")
    (args.out / "latest.json").write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


def measure(args: argparse.Namespace, work: Path) -> tuple[list[dict], dict]:
    """Both stages in WORK; returns the training metrics rows and the result."""
    data = work / "sft.jsonl"
    _, t_data = run([str(BIN / "python"), "examples/tool_use/make_sft_data.py", str(data)])
    _, t_sft = run([str(BIN / "temper"), "sft", "--config", "examples/tool_use/sft.yaml", "--out",
                    str(work / "sft"), "--set", f"data.path={data}"])
    warm = sorted((work / "sft").glob("step_*/model"))[-1]
    cmd = [str(BIN / "temper"), "train", "--config", "examples/train/tool-use.yaml", "--out", str(work / "rl"),
           "--set", f"model={warm}", "--set", "logging.progress=false"]
    if args.steps is not None:
        cmd += ["--max-steps", str(args.steps)]
    if args.eval_n is not None:
        cmd += ["--set", f"eval.n={args.eval_n}"]
    if args.batch_groups is not None:
        cmd += ["--set", f"orchestrator.batch_groups={args.batch_groups}"]
    out, t_rl = run(cmd)
    summary = json.loads(out.strip().splitlines()[-1])
    run_dir = Path(summary["run"])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    result = {
        "recipe": "examples/train/tool-use.yaml (stage 1: examples/tool_use/sft.yaml)",
        "commit": commit, "date": time.strftime("%Y-%m-%d"), "steps": summary["steps"],
        "before": {**summary["before"], "tool_calls": tool_calls(run_dir, "before")},
        "after": {**summary["after"], "tool_calls": tool_calls(run_dir, "after")},
        "difference": summary["difference"],
        "batch_reward": [r["reward"] for r in rows],
        "wall_s": {"stage1_sft": round(t_data + t_sft, 1), "stage2_rl": round(t_rl, 1),
                   "total": round(t_data + t_sft + t_rl, 1)},
        # ru_maxrss of the children: the largest single process, in KiB on Linux
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2),
    }
    return rows, result


def plot(rows: list[dict], path: Path) -> None:
    from temper.runtime import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["step"] for r in rows], [r["reward"] for r in rows], marker="o")
    ax.set_xlabel("step")
    ax.set_ylabel("batch reward (mean over episodes)")
    ax.set_ylim(0, 1)
    ax.set_title("tool-use recipe: batch reward per step")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
