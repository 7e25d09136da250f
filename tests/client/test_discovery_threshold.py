"""The release threshold of a sketch's candidates (client/discovery/threshold.py): a candidate
nobody holds clears it with probability at most the tail asked for, over the reports AND the
fixed hash family, even where the collisions with a heavy string are far from normal."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldptel.client.discovery.threshold import largest_count_bound, release_threshold
from ldptel.client.hashing import item_keys
from ldptel.client.oracles.cms import CountMeanSketch

HELD = {"heavy a": 8_000, "heavy b": 4_000} | {f"single {i}": 1 for i in range(400)}


def sketch(k: int, m: int, epsilon: float = 4.0) -> CountMeanSketch:
    return CountMeanSketch(epsilon=epsilon, domain_size=len(HELD), k=k, m=m, labels=list(HELD))


def test_with_negligible_collisions_it_is_the_normal_expected_shortfall() -> None:
    # 2^16 rows: 50 users' collisions add a standard deviation of 0.04 users; the threshold
    # is then the normal's expected shortfall sigma phi(z) / tail, z its tail quantile, up to
    # the grid the offsets are rounded up on (cells of sigma / 64: at most 2 cells above).
    oracle = sketch(k=2**16, m=1024)
    tail = 0.05 / 1000
    sigma = math.sqrt(float(oracle.variance(2_000, np.zeros(1))[0]))
    z = NormalDist().inv_cdf(1 - tail)
    threshold = release_threshold(oracle, 2_000, 50, tail)
    shortfall = sigma * NormalDist().pdf(z) / tail
    assert shortfall <= threshold <= shortfall + 2 * sigma / 64
    assert threshold > z * sigma


def test_it_grows_with_the_largest_count_and_with_fewer_rows() -> None:
    tail = 1e-5
    few, many = sketch(k=64, m=64), sketch(k=1024, m=64)
    assert release_threshold(few, 12_400, 8_000, tail) > release_threshold(few, 12_400, 100, tail)
    assert release_threshold(few, 12_400, 8_000, tail) > release_threshold(
        many, 12_400, 8_000, tail
    )


def test_candidates_nobody_holds_are_listed_at_most_at_the_rate_stated() -> None:
    # k = m = 64 and a string held by 2/3 of the users: a candidate nobody holds shares
    # Binomial(64, 1/64) rows with it. 80 reports of 12,400 users, each testing 3,000 fresh
    # strings nobody holds at 0.05 expected false discoveries: at most 4 in all are expected;
    # more than 11 has probability < 1e-3 (Poisson). The normal threshold with the family's
    # variance (the rule this replaced) lists ~0.27 a report here (55 in 200), about 22 in
    # 80: the test fails it.
    oracle = sketch(k=64, m=64)
    counts = np.array(list(HELD.values()))
    values = np.repeat(np.arange(counts.size), counts)
    n, candidates = int(counts.sum()), 3_000
    tail = 0.05 / candidates
    z = NormalDist().inv_cdf(1 - tail)
    rng = np.random.default_rng(2026)
    listed = normal_listed = heavy_listed = 0
    for run in range(80):
        support = oracle.support(oracle.perturb_batch(values, rng))
        nobody = oracle.estimate_keys(
            support, n, item_keys(f"nobody {run} {i}" for i in range(candidates))
        )
        heavy = oracle.estimate_keys(support, n, item_keys(["heavy a", "heavy b"]))
        threshold = release_threshold(
            oracle, n, largest_count_bound(oracle, n, float(heavy.max()), z), tail
        )
        listed += int(np.count_nonzero(nobody > threshold))
        heavy_listed += int(np.count_nonzero(heavy > threshold))
        plug_in = np.clip(np.rint(np.append(heavy, nobody)), 0, n).astype(np.int64)
        family = float(oracle.family_variance(np.append(plug_in, 0))[-1])
        noise = float(oracle.variance(n, np.zeros(1))[0])
        normal_listed += int(np.count_nonzero(nobody > z * math.sqrt(noise + family)))
    assert listed <= 11
    assert normal_listed > 11
    assert heavy_listed == 160  # and the strings held are found every time
