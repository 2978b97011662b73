"""The agent's context manager, measured: raw history in a large context against compaction in a small one, on
a long multi-turn family whose history outgrows the small budget, through the evaluation harness.

The family is `session:` (temper/envs/suites/session.py): a user shows --turns records of --record tokens, one
per message, the agent replies to each, and a last message asks about a fact from one of them (recall) or a chain
of assignments spread over all of them (track). Every arm runs the same tasks through `temper.evals.evaluate`
with the same model and engine (greedy), and differs only in the agent's context settings:

- raw: `max_context_tokens` 8192, the whole history (no window is ever compacted: checked, `windows` = 1);
- summary: 2048, older turns become an extractive summary (a line per turn), the last two kept verbatim;
- masking: 2048, observation masking: every turn's own replies kept, older records replaced by a placeholder;
- model_summary: 2048, the policy summarises older turns itself (greedy, at most --summary-tokens tokens).

`--arm LABEL:BUDGET:COMPACTION:SUMMARIZER` replaces the list. Reported per arm: mean reward with a 95% bootstrap
interval (and per task kind), the paired difference from the first arm over the same tasks, prompt tokens per
episode (summed over its model calls, summaries included: what an API bills), generated tokens, windows per
episode, and the arm's wall-clock seconds.

    .venv/bin/python benchmarks/context_bench.py [--n 40] [--turns 10] [--record 300] [--model smollm2-135m]
        [--endpoint http://127.0.0.1:8000/v1]
        [--arm raw:8192:summary:extractive --arm masking:2048:observation_masking:extractive ...]

Run it alone on the machine. Writes benchmarks/results/context_bench/latest.json and a PNG beside it (reward
against prompt tokens per episode, one point per arm); the last line of stdout is the JSON.
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "results" / "context_bench" / "latest.json"
ARMS = ["raw:8192:summary:extractive", "summary:2048:summary:extractive",
        "masking:2048:observation_masking:extractive", "model_summary:2048:summary:model"]


def log(msg: str) -> None:
    print(f"[context_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_arm(text: str) -> dict[str, Any]:
    """LABEL:BUDGET:COMPACTION:SUMMARIZER -> the arm, checked against the agent's own config."""
    from temper.agent.config import ContextConfig

    parts = text.split(":")
    if len(parts) != 4 or not parts[1].isdigit():
        raise SystemExit(f"context_bench: --arm {text!r}: expected LABEL:BUDGET:COMPACTION:SUMMARIZER, "
                         "e.g. masking:2048:observation_masking:extractive")
    try:
        ContextConfig(compaction=parts[2], summarizer=parts[3])
    except ValueError as exc:
        raise SystemExit(f"context_bench: --arm {text!r}: {exc.errors()[0]['msg']}") from None
    return {"label": parts[0], "budget": int(parts[1]), "compaction": parts[2], "summarizer": parts[3]}


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _fact(record: Any) -> int:
    """Which record of the session held the asked fact (a recall task's `factN` tag)."""
    return next(int(t[4:]) for t in record.tags if t.startswith("fact"))


def summarize(records: list[Any], turns: int, resamples: int) -> dict[str, Any]:
    """Per arm: reward (interval, per kind, recall by where the fact was: the first half of the records or
    the second), tokens, windows."""
    from temper.evals.stats import bootstrap_mean

    ok = [r for r in records if r.ok]
    ci = bootstrap_mean([r.reward for r in ok], resamples)
    from temper.envs.suites.session import KINDS

    kinds = sorted({t for r in ok for t in r.tags if t in KINDS})
    return {
        "reward": round(ci.mean, 4), "reward_ci": [round(ci.low, 4), round(ci.high, 4)], "items": len(ok),
        "failures": len(records) - len(ok),
        "reward_by_kind": {k: _mean([r.reward for r in ok if k in r.tags]) for k in kinds},
        "prompt_tokens_per_episode": round(sum(r.tokens_in for r in ok) / max(1, len(ok)), 1),
        "generated_tokens_per_episode": round(sum(r.tokens_out for r in ok) / max(1, len(ok)), 1),
        "reward_recall_by_fact": {half: _mean([r.reward for r in ok if "recall" in r.tags and
                                               (_fact(r) <= turns // 2) == (half == "early")])
                                  for half in ("early", "late")},
        "windows_per_episode": round(sum(r.info.get("windows", 1) for r in ok) / max(1, len(ok)), 2),
        "compacted_episodes": sum(r.info.get("windows", 1) > 1 for r in ok),
        "turns_per_episode": round(sum(r.turns for r in ok) / max(1, len(ok)), 2),
    }


def plot(arms: dict[str, dict[str, Any]], path: Path) -> None:
    from temper.runtime import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, a) in enumerate(arms.items()):
        x, (lo, hi) = a["prompt_tokens_per_episode"], a["reward_ci"]
        ax.errorbar([x], [a["reward"]], yerr=[[a["reward"] - lo], [hi - a["reward"]]], fmt="o", color=f"C{i}",
                    capsize=4, label=f"{label} ({a['budget']} tokens, {a['windows_per_episode']:.1f} windows)")
    ax.set_xlabel("prompt tokens per episode (summed over its model calls)")
    ax.set_ylabel("mean reward (95% CI)")
    ax.set_title("Context management on a long session: reward against prompt tokens")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


async def run(args: argparse.Namespace, arms: list[dict[str, Any]]) -> dict[str, Any]:
    from temper.evals.config import EvalConfig
    from temper.evals.harness import evaluate
    from temper.evals.model_solver import ModelSolver
    from temper.evals.stats import paired_bootstrap_difference

    spec = f"session:turns={args.turns},record={args.record},n={args.n},seed={args.seed}"
    agent = {"max_turns": args.turns + 2, "max_turn_tokens": args.turn_tokens, "temperature": 0.0}
    served = {"endpoint": args.endpoint} if args.endpoint else {}
    base = EvalConfig.from_recipe({"model": args.model, "concurrency": args.concurrency, "agent": agent, **served})
    solver = ModelSolver.load(base)
    out: dict[str, dict[str, Any]] = {}
    rewards: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for arm in arms:
                context = {"compaction": arm["compaction"], "summarizer": arm["summarizer"],
                           "summary_max_tokens": args.summary_tokens}
                solver.cfg = EvalConfig.from_recipe({"model": args.model, "concurrency": args.concurrency, **served,
                                                     "agent": {**agent, "max_context_tokens": arm["budget"],
                                                               "context": context}})
                log(f"{arm['label']}: budget {arm['budget']}, {arm['compaction']}, {arm['summarizer']} summaries")
                t = time.monotonic()
                result = await evaluate(solver, [spec], solver.cfg, Path(tmp) / arm["label"], report=False)
                records = result.records[spec]
                out[arm["label"]] = {**arm, **summarize(records, args.turns, base.resamples),
                                     "seconds": round(time.monotonic() - t, 1)}
                rewards[arm["label"]] = {r.task_id: r.reward for r in records if r.ok}
                a = out[arm["label"]]
                log(f"{arm['label']}: reward {a['reward']:.3f} {a['reward_ci']}, {a['prompt_tokens_per_episode']:.0f} "
                    f"prompt tokens/episode, {a['windows_per_episode']:.2f} windows, {a['seconds']:.0f} s")
    finally:
        solver.close()
    first = arms[0]["label"]
    for label, a in out.items():
        if label == first:
            continue
        common = sorted(set(rewards[label]) & set(rewards[first]))
        d = paired_bootstrap_difference([rewards[label][t] for t in common], [rewards[first][t] for t in common],
                                        base.resamples)
        a[f"minus_{first}"] = round(d.mean, 4)
        a[f"minus_{first}_ci"] = [round(d.low, 4), round(d.high, 4)]
        a["prompt_tokens_ratio"] = round(a["prompt_tokens_per_episode"] / out[first]["prompt_tokens_per_episode"], 3)
    return {"suite": spec, "model": args.model, "turn_tokens": args.turn_tokens, "summary_tokens": args.summary_tokens,
            "arms": out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--endpoint", default=None, help="an OpenAI-compatible server to evaluate (--model names its "
                    "tokenizer), e.g. a larger model on vLLM")
    ap.add_argument("--n", type=int, default=40, help="tasks (the kinds alternate: half recall, half track)")
    ap.add_argument("--turns", type=int, default=10, help="records per session")
    ap.add_argument("--record", type=int, default=300, help="tokens per record (~4 characters each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--turn-tokens", type=int, default=48, help="the agent's max_turn_tokens")
    ap.add_argument("--summary-tokens", type=int, default=128, help="the context's summary_max_tokens")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--arm", action="append", default=None, help="LABEL:BUDGET:COMPACTION:SUMMARIZER (repeatable)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    arms = [parse_arm(a) for a in args.arm or ARMS]  # every arm checked before the model loads
    t0 = time.monotonic()
    result = asyncio.run(run(args, arms))
    result["total_minutes"] = round((time.monotonic() - t0) / 60, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plot(result["arms"], args.out.with_suffix(".png"))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
