"""pass@k and bootstrap intervals against hand-computed values."""

import math

import numpy as np
import pytest

from temper.evals.stats import (
    bootstrap_mean,
    clustered_bootstrap_mean,
    mean_pass_at_k,
    paired_bootstrap_difference,
    pass_at_k,
)


@pytest.mark.parametrize(("n", "c", "k"), [(10, 3, 1), (10, 3, 2), (10, 3, 5), (5, 0, 2), (5, 5, 3), (20, 7, 10)])
def test_pass_at_k_matches_the_combinatorial_definition(n, c, k):
    expected = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_hand_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert mean_pass_at_k([(4, 1), (4, 4)], 2) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k(3, 1, 5)


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = bootstrap_mean(rng.integers(0, 2, 50).astype(float))
    large = bootstrap_mean(rng.integers(0, 2, 2000).astype(float))
    assert small.low < small.mean < small.high
    assert (large.high - large.low) < (small.high - small.low)


def test_paired_difference_detects_a_consistent_gain():
    before = np.zeros(200)
    after = np.where(np.arange(200) % 4 == 0, 1.0, 0.0)  # +0.25 on matched items
    diff = paired_bootstrap_difference(after, before)
    assert diff.mean == pytest.approx(0.25)
    assert diff.low > 0


def test_clustered_bootstrap_carries_the_variance_between_clusters():
    rng = np.random.default_rng(1)
    # three "seeds" that disagree (means 0.2, 0.5, 0.8), 200 tasks each
    clusters = [list((rng.random(200) < p).astype(float)) for p in (0.2, 0.5, 0.8)]
    pooled = bootstrap_mean([x for c in clusters for x in c])
    clustered = clustered_bootstrap_mean(clusters)
    assert clustered.n == 600 and abs(clustered.mean - pooled.mean) < 1e-9
    assert clustered.low <= clustered.mean <= clustered.high
    assert (clustered.high - clustered.low) > 3 * (pooled.high - pooled.low)  # the seeds' spread counts
    agree = clustered_bootstrap_mean([list((rng.random(200) < 0.5).astype(float)) for _ in range(3)])
    assert (agree.high - agree.low) < (clustered.high - clustered.low) / 2  # seeds that agree: narrow again
