"""Metrics of one suite's records: mean reward with a bootstrap CI, unbiased pass@k for every k
the samples allow, per-domain breakdowns, and infrastructure failures counted apart.

The unit of the CI is the task: a task's score is the mean reward of its valid samples, and the
bootstrap resamples tasks (samples of one task are not independent evidence). A sample that hit
an infrastructure failure is not a wrong answer: it is left out of every score and counted in
`infra_failures`; a task left with no valid sample is left out of `n`.
"""

import json
import math
from collections import Counter, defaultdict
from typing import Any

from temper.evals.metering import mean
from temper.evals.records import ItemRecord
from temper.evals.stats import bootstrap_mean, mean_pass_at_k

PASS_KS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def ks_for(samples: int) -> list[int]:
    """pass@k is reported for these k: the usual ones up to the samples drawn, and the samples."""
    return sorted({k for k in PASS_KS if k <= samples} | {samples})


def per_task(records: list[ItemRecord], threshold: float = 1.0) -> dict[str, dict[str, Any]]:
    """task id -> its valid rewards, n, c (samples reaching `threshold`) and domain."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: (r.task_id, r.sample)):
        t = out.setdefault(r.task_id, {"rewards": [], "n": 0, "c": 0, "domain": r.domain, "base_id": r.base_id})
        if r.ok:
            t["rewards"].append(r.reward)
            t["n"] += 1
            t["c"] += int(r.reward >= threshold)
    return out


def task_scores(records: list[ItemRecord], threshold: float = 1.0) -> dict[str, float]:
    """task id -> mean reward over its valid samples (tasks with none are left out)."""
    return {tid: sum(t["rewards"]) / t["n"] for tid, t in per_task(records, threshold).items() if t["n"]}


def metrics(records: list[ItemRecord], samples: int, threshold: float = 1.0, resamples: int = 2000) -> dict[str, Any]:
    tasks = per_task(records, threshold)
    valid = {tid: t for tid, t in tasks.items() if t["n"]}
    ci = bootstrap_mean([sum(t["rewards"]) / t["n"] for t in valid.values()], resamples=resamples)
    out: dict[str, Any] = {"n": len(valid), "mean_reward": _num(ci.mean), "ci_low": _num(ci.low),
                           "ci_high": _num(ci.high)}
    for k in ks_for(samples):
        # An item contributes to pass@k when at least k of its samples are valid.
        counts = [(t["n"], t["c"]) for t in valid.values() if t["n"] >= k]
        out[f"pass@{k}"] = _num(mean_pass_at_k(counts, k)) if counts else None
    out["items"] = len(records)
    out["infra_failures"] = sum(not r.ok for r in records)
    return out


def summarize_suite(records: list[ItemRecord], samples: int, threshold: float = 1.0,
                    resamples: int = 2000) -> dict[str, Any]:
    """The summary.json entry of one suite."""
    out = metrics(records, samples, threshold, resamples)
    out["samples"] = samples
    out["failures"] = dict(Counter(r.failure for r in records if not r.ok))
    by_domain: dict[str, list[ItemRecord]] = defaultdict(list)
    for r in records:
        by_domain[r.domain].append(r)
    out["domains"] = {d: metrics(rs, samples, threshold, resamples) for d, rs in sorted(by_domain.items())}
    ok = [r for r in records if r.ok]
    out["tool_calls"] = tool_call_rates(ok)
    by_category: dict[str, list[ItemRecord]] = defaultdict(list)
    for r in ok:
        if r.info.get("category"):
            by_category[r.info["category"]].append(r)
    if by_category:  # e.g. the web suite's: how often each kind of task got the external tool it expects
        out["categories"] = {c: category_rates(rs) for c, rs in sorted(by_category.items())}
    out["usage"] = {
        "tokens_in_mean": mean([r.tokens_in for r in ok]),
        "tokens_out_mean": mean([r.tokens_out for r in ok]),
        "latency_s_mean": mean([r.latency_s for r in ok]),
        "ttft_s_mean": mean([r.ttft_s for r in ok]),
        "tpot_s_mean": mean([r.tpot_s for r in ok]),
        "cost_total": sum(r.cost for r in records),
        "cost_per_item": mean([r.cost for r in ok]),
    }
    return finite(out)


def finite(x: Any) -> Any:
    """`x` with every NaN or infinite float made null: JSON has no such numbers (summary.json is read by
    other tools and by plots.py), and a reward that got past the envs' checks must not break the report."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def to_json(summary: Any) -> str:
    """summary.json's text: strict JSON (allow_nan=False), non-finite numbers as null."""
    return json.dumps(finite(summary), indent=2, allow_nan=False) + "\n"


def tool_call_rates(records: list[ItemRecord]) -> dict[str, Any]:
    """calls, correct (ran without error), correct_rate, and episodes_with_correct_call (the share of
    items with at least one correct call), over items whose solver counts tool calls."""
    counted = [r for r in records if "tool_calls" in r.info]
    calls = sum(r.info["tool_calls"] for r in counted)
    correct = calls - sum(r.info["tool_errors"] for r in counted)
    with_one = sum(r.info["tool_calls"] > r.info["tool_errors"] for r in counted)
    return {"calls": calls, "correct": correct, "correct_rate": _num(correct / calls) if calls else None,
            "episodes_with_correct_call": _num(with_one / len(counted)) if counted else None}


def category_rates(records: list[ItemRecord]) -> dict[str, Any]:
    """One task category's items: tool calls per item (mean), and over items whose task expects an external
    tool ([metadata] tools) and whose commands could be read, the share where the agent ran one."""
    judged = [r for r in records if "expected_tool_used" in r.info]
    return {"items": len(records), "tool_calls_mean": mean([r.info.get("tool_calls", 0) for r in records]),
            "tools_expected_items": len(judged),
            "expected_tool_used_rate": _num(sum(r.info["expected_tool_used"] for r in judged) / len(judged))
            if judged else None}


def _num(x: float) -> float | None:
    """JSON has no NaN or infinities: an undefined metric (no valid items) is null, and so is one that
    is not finite."""
    return round(float(x), 6) if math.isfinite(x) else None
