"""Heavy-hitter discovery with no candidate list (PEM over count mean sketches), simulated
through the real client code: frequent strings are found, strings held by one user never
appear, and the threshold is the one stated, with the false-discovery rate it promises."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from ldptel.analysis.heavy_hitters import (
    HeavyHitterSimulation,
    group_supports,
    simulate_discovery,
)
from ldptel.analysis.simulation import simulate_support
from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.threshold import largest_count_bound, release_threshold
from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_keys
from ldptel.client.samplers import sample_uniform_below

Found = tuple[PrefixExtendingMethod, HeavyHitterSimulation]
FREQUENT = {"red": 2_500, "blue": 1_800, "green": 1_400, "vert clair": 1_200, "grün": 1_100}


def answers(singletons: int) -> list[str]:
    """Frequent answers and a tail of answers held by one user each (misspellings)."""
    values = [value for value, count in FREQUENT.items() for _ in range(count)]
    return values + [f"r{i:04d}d" for i in range(singletons)]


@pytest.fixture(scope="module")
def found() -> Found:
    pem = PrefixExtendingMethod(epsilon=4.0, max_length=12, top_k=16)
    # Expected false discoveries 1e-3: the singletons' test below fails by chance with
    # probability at most 1e-3 (and it is one fixed seed).
    return pem, simulate_discovery(pem, answers(1_500), np.random.default_rng(7), 1e-3)


def test_frequent_strings_are_found_with_their_counts(found: Found) -> None:
    _, result = found
    discovery = result.discovery
    assert set(FREQUENT) <= set(discovery.values)
    for value, estimate, stderr in zip(
        discovery.values, discovery.estimate, discovery.stderr, strict=True
    ):
        # 5 strings, |z| < 4: false failure about 3e-4.
        assert abs(estimate - FREQUENT[value]) < 4 * stderr, value
    assert list(discovery.estimate) == sorted(discovery.estimate, reverse=True)
    assert result.recall == 1.0 and result.precision == 1.0


def test_strings_held_by_one_user_never_appear(found: Found) -> None:
    _, result = found
    assert all(result.true(value) > 1 for value in result.discovery.values)
    assert result.discovery.n == sum(FREQUENT.values()) + 1_500


def test_the_threshold_is_stated_and_derived_from_the_exact_variance(found: Found) -> None:
    pem, result = found
    discovery = result.discovery
    assert discovery.expected_false_discoveries == pytest.approx(1e-3)
    # The users' groups are the simulation's first draw: the last group's size.
    groups = sample_uniform_below(np.random.default_rng(7), pem.groups, discovery.n)
    size = int(np.count_nonzero(groups == pem.groups - 1))
    # T in the last group, scaled to all n users: the expected shortfall at 1e-3 / C of a
    # candidate nobody holds: at least the noise's alone, sigma_0 phi(z) / tail, and barely
    # above it: the collisions of 1024 rows with strings of ~200 users per group add little.
    tail = 1e-3 / discovery.candidates
    z = NormalDist().inv_cdf(1 - tail)
    noise = float(pem.oracle.key_variance(size, np.zeros(1))[0])
    alone = math.sqrt(noise) * NormalDist().pdf(z) / tail * discovery.n / size
    assert alone <= discovery.threshold <= 1.02 * alone
    assert discovery.candidates > len(discovery.values)
    assert all(estimate > discovery.threshold for estimate in discovery.estimate)


def test_absent_strings_clear_the_threshold_at_the_rate_it_promises() -> None:
    # One group's sketch of 20 values held by 20,000 users; 4,000 strings nobody holds,
    # tested at z = 2: each clears it with probability 1 - Phi(2) = 2.28%. The count is
    # within 5 binomial standard deviations (false failure < 1e-6).
    pem = PrefixExtendingMethod(epsilon=4.0, max_length=4, top_k=4)
    oracle = pem.group_oracle([f"v{i}" for i in range(20)])
    counts = np.full(20, 1_000)
    support = simulate_support(oracle, counts, np.random.default_rng(3))
    absent = item_keys(f"absent-{i}" for i in range(4_000))
    estimate = pem.oracle.estimate_keys(support, 20_000, absent)
    sigma0 = math.sqrt(float(pem.oracle.key_variance(20_000, np.zeros(1))[0]))
    rate = 1 - NormalDist().cdf(2.0)
    cleared = int(np.count_nonzero(estimate > 2.0 * sigma0))
    assert abs(cleared - 4_000 * rate) < 5 * math.sqrt(4_000 * rate * (1 - rate)), cleared


def test_the_groups_split_the_users_and_every_group_is_needed() -> None:
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=2, top_k=2, k=8, m=16)
    supports, sizes = group_supports(pem, ["ab"] * 300, np.random.default_rng(1))
    assert sum(sizes) == 300 and len(supports) == pem.groups
    with pytest.raises(ParameterError) as error:
        pem.discover(supports, [0, *sizes[1:]])
    assert error.value.field == "group_counts"
    with pytest.raises(ParameterError):
        simulate_discovery(pem, [], np.random.default_rng(1))


def test_the_scaled_estimate_is_unbiased_with_the_stated_variance() -> None:
    # Two groups; "aa" held by 1,500 of 4,000 users. Over 200 repetitions its estimate among
    # all users averages 1,500 and varies as stated (oracle + the group's sampling term):
    # the mean within 4.5 standard errors, the variance ratio inside chi-square bounds at
    # 1e-4 each side (false failure about 1e-4 in all). A sketch of 256 x 256 keeps the
    # fixed hash family's offset (KeySketch.family_variance: standard deviation about 8
    # users here) well below the mean's tolerance (about 30); with 8 x 16 it was -167 users.
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=2, top_k=2, k=256, m=256)
    assert pem.groups == 2
    values = ["aa"] * 1_500 + ["ab"] * 1_000 + ["ba"] * 1_500
    rng = np.random.default_rng(11)
    estimates, variances = [], []
    for _ in range(200):
        discovery = simulate_discovery(pem, values, rng).discovery
        at = discovery.values.index("aa")
        estimates.append(discovery.estimate[at])
        variances.append(discovery.stderr[at] ** 2)
    stated = float(np.mean(variances))
    assert abs(np.mean(estimates) - 1_500) < 4.5 * math.sqrt(stated / 200)
    ratio = float(np.var(estimates, ddof=1)) / stated
    low, high = stats.chi2.ppf([1e-4, 1 - 1e-4], 199) / 199
    assert low < ratio < high, ratio


def test_the_threshold_holds_for_the_worst_collisions_with_the_most_held_string() -> None:
    # One candidate estimated at 1,000 of a group's 10,000 reports, at k = 16 rows: a string
    # nobody holds shares rows with it as Binomial(16, 1/64), far from normal, so T is that
    # worst case's expected shortfall (client/discovery/threshold.py), above z times the
    # stderr with the family's term; scaled by n / size = 2 to counts among all users.
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=1, top_k=2, k=16, m=64)
    labels = [pem.prefix(value, 0) for value in ("a", "b", "c")]
    found = pem.release(labels, np.array([1_000.0, 0.0, -5.0]), 10_000, 20_000, 0.01)
    z = NormalDist().inv_cdf(1 - 0.01 / 3)
    largest = largest_count_bound(pem.oracle, 10_000, 1_000.0, z)
    assert found.threshold == 2 * release_threshold(pem.oracle, 10_000, largest, 0.01 / 3)
    noise = float(pem.oracle.key_variance(10_000, np.zeros(1))[0])
    family = 1_000 * 999 / (16 * 63)
    assert found.threshold > 2 * z * math.sqrt(noise + family)
    assert found.values == ("a",) and found.candidates == 3
    assert found.estimate[0] == 2_000.0
