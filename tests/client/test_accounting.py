"""Optimal composition (ldptel.client.accounting) against exact sums over every outcome of
composed randomized response, Kairouz-Oh-Viswanath's Theorem 3.3, and Google's dp-accounting."""

from __future__ import annotations

import itertools
import math

import pytest
from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as pld

from ldptel.client.accounting import composed_delta, composed_epsilon, max_reports


def exact_delta(charges: list[tuple[float, int]], epsilon: float) -> float:
    """E[(1 - e^(eps - L))_+] over every flip count of every charge's randomized responses."""
    laws = []
    for eps0, count in charges:
        flip = 1 / (1 + math.exp(eps0))
        laws.append(
            [
                ((count - 2 * f) * eps0, math.comb(count, f) * flip**f * (1 - flip) ** (count - f))
                for f in range(count + 1)
            ]
        )
    total = 0.0
    for outcome in itertools.product(*laws):
        loss = sum(value for value, _ in outcome)
        if loss > epsilon:
            total += math.prod(p for _, p in outcome) * -math.expm1(epsilon - loss)
    return total


@pytest.mark.parametrize(("eps0", "count"), [(0.1, 100), (0.5, 30), (1.0, 12), (0.05, 400)])
def test_one_epsilon_composes_exactly(eps0: float, count: int) -> None:
    for epsilon in (0.5, 1.0, 2.0):
        assert composed_delta([(eps0, count)], epsilon) == pytest.approx(
            exact_delta([(eps0, count)], epsilon), rel=1e-9, abs=1e-15
        )
    for delta in (1e-3, 1e-6):
        found = composed_epsilon([(eps0, count)], delta)
        assert exact_delta([(eps0, count)], found) <= delta * (1 + 1e-9)
        assert exact_delta([(eps0, count)], found * (1 - 1e-6)) > delta


def test_it_is_kairouz_oh_viswanath_theorem_3_3() -> None:
    # k-fold (eps0, delta0): ((k - 2i) eps0, 1 - (1 - delta0)^k (1 - delta_i)), with
    # delta_i = sum_{l < i} C(k, l) (e^((k-l) eps0) - e^((k-2i+l) eps0)) / (1 + e^eps0)^k.
    k, eps0, delta0 = 20, 0.3, 1e-7
    for i in (3, 6, 8):
        delta_i = (
            sum(
                math.comb(k, j) * (math.exp((k - j) * eps0) - math.exp((k - 2 * i + j) * eps0))
                for j in range(i)
            )
            / (1 + math.exp(eps0)) ** k
        )
        expected = 1 - (1 - delta0) ** k * (1 - delta_i)
        got = composed_delta([(eps0, k)], (k - 2 * i) * eps0, each_delta=delta0)
        assert got == pytest.approx(expected, rel=1e-9)


def test_several_epsilons_are_bounded_from_above_and_closely() -> None:
    charges = [(0.3, 14), (0.8, 6)]
    for delta in (1e-2, 1e-4):
        found = composed_epsilon(charges, delta)
        assert exact_delta(charges, found) <= delta
        assert exact_delta(charges, found - 0.01) > delta


def dp_accounting_epsilon(charges: list[tuple[float, int]], delta: float) -> float:
    composed = None
    for eps0, count in charges:
        one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps0, 0.0))
        part = one.self_compose(count)
        composed = part if composed is None else composed.compose(part)
    assert composed is not None
    return float(composed.get_epsilon_for_delta(delta))


@pytest.mark.parametrize(
    "charges", [[(0.1, 346)], [(0.1, 100)], [(1.0, 25)], [(0.1, 200), (0.5, 20), (0.05, 300)]]
)
def test_it_agrees_with_google_dp_accounting(charges: list[tuple[float, int]]) -> None:
    # Both round losses up on a grid (theirs 1e-4; ours, for several epsilons, ~3e-4).
    ours, theirs = composed_epsilon(charges, 1e-6), dp_accounting_epsilon(charges, 1e-6)
    assert ours == pytest.approx(theirs, abs=0.003 if len(charges) > 1 else 1e-4)


def test_the_issue_s_numbers_and_no_gain_from_epsilon_one_half() -> None:
    assert composed_epsilon([(0.1, 100)], 1e-6) == pytest.approx(4.77, abs=0.005)
    assert max_reports(0.1, 10.0, 1e-6) == 346  # basic composition: 100
    assert max_reports(0.5, 10.0, 1e-6) == 20  # = 10 / 0.5: nothing gained
    assert max_reports(1.0, 10.0, 1e-6) == 10


def test_edge_cases() -> None:
    assert composed_epsilon([], 1e-6) == 0.0
    assert composed_epsilon([(1.0, 3)], 0.5) <= 3.0
    # delta below what each mechanism's own delta adds up to: no epsilon meets it.
    assert composed_epsilon([(1.0, 10)], 1e-9, each_delta=1e-9) == math.inf


def test_a_huge_epsilon_composes_to_its_sum_without_overflow() -> None:
    # e^eps overflows past 709: such reports are never flipped, so they compose to the sum.
    assert composed_epsilon([(800.0, 3)], 1e-6) == 2400.0
