"""Statistics for evaluation: unbiased pass@k and bootstrap confidence intervals.

pass@k follows Chen et al. 2021 (the HumanEval paper): with n samples of which c are
correct, pass@k = 1 - C(n-c, k) / C(n, k), computed as a stable product.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of the probability that at least one of k samples is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if k > n:
        raise ValueError(f"pass_at_k: k={k} exceeds the number of samples n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Mean pass@k over items given (n, c) per item."""
    return float(np.mean([pass_at_k(n, c, k) for n, c in counts])) if counts else float("nan")


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int


def bootstrap_mean(values: Sequence[float], resamples: int = 2000, confidence: float = 0.95,
                   seed: int = 0) -> Interval:
    """Percentile bootstrap CI of the mean."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return Interval(float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)), x.size)


def paired_bootstrap_difference(after: Sequence[float], before: Sequence[float], resamples: int = 2000,
                                confidence: float = 0.95, seed: int = 0) -> Interval:
    """CI of mean(after - before) over matched items, resampling items (pairs) together."""
    a, b = np.asarray(after, dtype=float), np.asarray(before, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs matched items, got {a.size} and {b.size}")
    return bootstrap_mean(a - b, resamples, confidence, seed)


def unpaired_bootstrap_difference(after: Sequence[float], before: Sequence[float], resamples: int = 2000,
                                  confidence: float = 0.95, seed: int = 0) -> Interval:
    """CI of mean(after) - mean(before) when the items do not match: resample each side alone."""
    a, b = np.asarray(after, dtype=float), np.asarray(before, dtype=float)
    if a.size == 0 or b.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(seed)
    da = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
    db = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
    diffs = da - db
    alpha = (1 - confidence) / 2
    return Interval(float(a.mean() - b.mean()), float(np.quantile(diffs, alpha)),
                    float(np.quantile(diffs, 1 - alpha)), min(a.size, b.size))


def clustered_bootstrap_mean(clusters: Sequence[Sequence[float]], resamples: int = 2000, confidence: float = 0.95,
                             seed: int = 0) -> Interval:
    """Percentile CI of the mean over clusters of items (e.g. training seeds x held-out tasks): each resample
    draws clusters with replacement, then items within each drawn cluster, so that the interval carries the
    seed-to-seed variance as well as the task sampling (a plain bootstrap over all items pools them and is
    too narrow when seeds disagree)."""
    groups = [np.asarray(c, dtype=float) for c in clusters if len(c)]
    if not groups:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        picked = rng.integers(0, len(groups), size=len(groups))
        means[r] = np.mean([groups[i][rng.integers(0, groups[i].size, size=groups[i].size)].mean() for i in picked])
    alpha = (1 - confidence) / 2
    point = float(np.mean([g.mean() for g in groups]))
    return Interval(point, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)),
                    sum(g.size for g in groups))
