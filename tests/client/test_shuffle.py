"""The numerical shuffle bound (ldptel.client.shuffle): an upper bound on the divergence of
Feldman, McMillan and Talwar's pair P, Q (FOCS 2021, Thm. 3.2), checked against that divergence
computed by brute force, and against the bounds the authors' own code computes."""

from __future__ import annotations

import math

import pytest

from ldptel.client.shuffle import closed_form_epsilon, default_delta, shuffled_epsilon

#: (n, eps0, delta, lower, upper): numericalanalysis(n, eps0, delta, 30, step, False / True)
#: of apple/ml-shuffling-amplification's computeamplification.py (the paper's reference code),
#: run at step 1 and 10; the highest lower and lowest upper bound of the two runs. The true
#: epsilon of the pair lies between them.
REFERENCE = [
    (1_000, 1.0, 1e-6, 0.18240762100693708, 0.1852383480846228),
    (2_000, 3.0, 1e-4, 0.5572083787992597, 0.5898818420246243),
    (10_000, 4.0, 1e-6, 0.6008435748517513, 0.6208202056586742),
    (10_000, 0.1, 1e-5, 0.0020559770015297907, 0.00231861392748979),
    (10_000, 1.0, 1e-6, 0.052970007314299794, 0.05496795740249892),
    (100_000, 1.0, 1e-6, 0.015281035535011225, 0.016113431511719623),
    (100_000, 0.5, 1e-6, 0.005812308331055867, 0.006171045639519859),
    (100_000, 4.0, 1e-6, 0.16954507221640752, 0.17512131823400418),
    (100_000, 2.0, 1e-8, 0.058752601309743885, 0.06026352655282733),
    (1_000_000, 2.0, 1e-7, 0.015397675432967738, 0.016063525088686352),
]


@pytest.mark.parametrize(("n", "eps0", "delta", "lower", "upper"), REFERENCE)
def test_the_bound_lies_between_the_reference_codes_bounds_and_near_the_lower(
    n: int, eps0: float, delta: float, lower: float, upper: float
) -> None:
    epsilon = shuffled_epsilon(eps0, n, delta)
    assert lower <= epsilon <= upper
    assert epsilon <= 1.005 * lower  # within 0.5% of the pair's own epsilon


def pair_divergence(n: int, eps0: float, epsilon: float) -> float:
    """D_{e^eps}(P || Q) of FMT21's pair, summed over every (c, k) in exact binomials."""
    alpha, clone = math.exp(eps0) / (math.exp(eps0) + 1), math.exp(-eps0)
    total = 0.0
    for c in range(n):
        weight = math.comb(n - 1, c) * clone**c * (1 - clone) ** (n - 1 - c)
        half = [math.comb(c, k) / 2**c for k in range(c + 1)] + [0.0]
        for k in range(c + 2):
            below = half[k - 1] if k else 0.0
            p = alpha * below + (1 - alpha) * half[k]
            q = (1 - alpha) * below + alpha * half[k]
            total += weight * max(0.0, p - math.exp(epsilon) * q)
    return total


@pytest.mark.parametrize(
    ("n", "eps0", "delta"), [(40, 1.0, 1e-2), (150, 2.0, 1e-3), (300, 0.5, 1e-4)]
)
def test_the_bound_holds_and_is_tight_against_the_pair_computed_exactly(
    n: int, eps0: float, delta: float
) -> None:
    epsilon = shuffled_epsilon(eps0, n, delta)
    assert 0 < epsilon < eps0
    assert pair_divergence(n, eps0, epsilon) <= delta
    assert pair_divergence(n, eps0, 0.995 * epsilon) > delta


def test_it_is_several_times_tighter_than_the_closed_form_where_both_apply() -> None:
    for n, eps0 in [(100_000, 1.0), (1_000_000, 2.0), (10_000, 0.5)]:
        delta = default_delta(n)
        closed = closed_form_epsilon(eps0, n, delta)
        assert closed is not None and shuffled_epsilon(eps0, n, delta) <= closed / 3


def test_the_closed_form_is_theorem_3_1() -> None:
    n, delta, e = 100_000, 1e-6, math.e
    spread = 8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n
    assert closed_form_epsilon(1.0, n, delta) == pytest.approx(
        math.log1p((e - 1) / (e + 1) * spread)
    )
    # Its precondition eps0 <= log(n / (16 log(2/delta))) fails at n = 10^4, eps0 = 4.
    assert closed_form_epsilon(4.0, 10_000, 1e-6) is None
    assert 0.5 < shuffled_epsilon(4.0, 10_000, 1e-6) < 0.65


def test_without_other_users_nothing_is_gained() -> None:
    assert shuffled_epsilon(1.0, 1, 1e-6) == 1.0
    assert shuffled_epsilon(1.0, 2, 1e-6) > 0.99  # one other user is one clone at most
