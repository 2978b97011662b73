"""Clean vs noisy: for every `noisy:suite=S,...` run next to S itself, the score drop with a CI.

Noisy tasks keep the clean task's payload and verifier (only the prompt is corrupted), so the two
are paired per task through `base_id`; the drop is mean(clean - noisy) over matched tasks.
"""

from typing import Any

from temper.envs.registry import split_args
from temper.evals.records import ItemRecord
from temper.evals.stats import paired_bootstrap_difference, unpaired_bootstrap_difference
from temper.evals.summary import task_scores


def clean_spec(spec: str) -> str | None:
    """`noisy:suite=(humaneval),rate=0.1` -> `humaneval`; None for a suite that is not noisy."""
    name, _, rest = spec.strip().partition(":")
    if name != "noisy":
        return None
    try:
        return split_args(rest, spec).get("suite")
    except Exception:
        return None


def base_scores(records: list[ItemRecord], threshold: float) -> dict[str, float]:
    by_task = {r.task_id: r.base_id for r in records}
    return {by_task[tid]: s for tid, s in task_scores(records, threshold).items()}


def noise_pairs(records: dict[str, list[ItemRecord]], threshold: float = 1.0,
                resamples: int = 2000) -> list[dict[str, Any]]:
    """One entry per (clean, noisy) pair of suites found in a run."""
    norm = {spec.replace(" ", ""): spec for spec in records}
    out = []
    for spec, recs in records.items():
        inner = clean_spec(spec)
        if inner is None or (clean := norm.get(inner.replace(" ", ""))) is None:
            continue
        a, b = base_scores(records[clean], threshold), base_scores(recs, threshold)
        common = sorted(set(a) & set(b))
        if common:
            ci = paired_bootstrap_difference([a[k] for k in common], [b[k] for k in common], resamples)
        else:
            ci = unpaired_bootstrap_difference(list(a.values()), list(b.values()), resamples)
        out.append({"clean": clean, "noisy": spec, "clean_mean": _mean(a.values()), "noisy_mean": _mean(b.values()),
                    "drop": _r(ci.mean), "ci_low": _r(ci.low), "ci_high": _r(ci.high), "paired": len(common)})
    return out


def _mean(xs: Any) -> float | None:
    xs = list(xs)
    return round(sum(xs) / len(xs), 6) if xs else None


def _r(x: float) -> float | None:
    return None if x != x else round(x, 6)
