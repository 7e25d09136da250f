"""Hadamard Response: the code, unbiasedness and variance vs theory, privacy, wire, vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from contract_checks import Z_LIMIT, event_z, variance_ratios, z_scores
from numpy.typing import NDArray
from scipy.linalg import hadamard

from ldptel.analysis.audit import exact_audit, sampled_audit
from ldptel.client.errors import ReportError
from ldptel.client.oracles.hr import HadamardResponse, fwht, parity

VECTORS = Path(__file__).parents[2] / "vectors" / "hr.json"
SKEWED = np.array([2700, 100, 60, 50, 40, 30, 20, 0, 0, 0], dtype=np.int64)


class LeakyRows(HadamardResponse):
    """Reports inside C_x with the probability of epsilon 2 while claiming epsilon 1."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.p = math.exp(2.0) / (math.exp(2.0) + 1)

    @property
    def epsilon(self) -> float:
        return 1.0


@pytest.mark.parametrize(("d", "K"), [(2, 4), (3, 4), (4, 8), (7, 8), (8, 16), (1000, 1024)])
def test_code_length_is_the_next_power_of_two_above_d(d: int, K: int) -> None:
    assert HadamardResponse(epsilon=1.0, domain_size=d).K == K


def test_fwht_is_the_sylvester_hadamard_product() -> None:
    values = np.random.default_rng(0).integers(-50, 50, 64)
    assert np.array_equal(fwht(values), hadamard(64) @ values)
    y = np.arange(64)
    for row in (1, 5, 63):
        assert np.array_equal(1 - 2 * parity(row & y), hadamard(64)[row])


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_estimates_are_unbiased_within_their_standard_errors(eps: float) -> None:
    oracle = HadamardResponse(epsilon=eps, domain_size=SKEWED.size)
    z = z_scores(oracle, SKEWED * 20, np.random.default_rng(21))
    assert np.max(np.abs(z)) < Z_LIMIT, z


def test_the_unbiasedness_check_catches_a_wrong_scale() -> None:
    class PlusMinusAsCounts(HadamardResponse):
        """Divides the +-1 sum by p* - q* as if it were a support count (off by 2)."""

        def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
            return fwht(support)[1 : self.domain_size + 1] / (self.p - 0.5)

    oracle = PlusMinusAsCounts(epsilon=1.0, domain_size=SKEWED.size)
    z = z_scores(oracle, SKEWED * 20, np.random.default_rng(21))
    assert np.max(np.abs(z)) > Z_LIMIT


def test_variance_matches_the_exact_formula() -> None:
    oracle = HadamardResponse(epsilon=3.0, domain_size=SKEWED.size)
    ratios, (low, high) = variance_ratios(oracle, SKEWED, 300, np.random.default_rng(22))
    assert np.all((low < ratios) & (ratios < high)), ratios
    # Without its f_v term (Var = n/(2p-1)^2 - n_x) the heavy item's variance
    # at epsilon 3 is 1.22 n instead of 0.32 n.
    n = int(SKEWED.sum())
    without_term = ratios * oracle.variance(n, SKEWED / n) / oracle.variance(n)
    assert not np.all((low < without_term) & (without_term < high))


def test_variance_is_the_closed_form() -> None:
    oracle = HadamardResponse(epsilon=2.0, domain_size=100)
    e = math.exp(2.0)
    assert oracle.variance(1)[0] == pytest.approx((e + 1) ** 2 / (e - 1) ** 2)


@pytest.mark.parametrize(("d", "eps"), [(7, 1.0), (16, 4.0)])
def test_exact_audit_measures_the_claimed_epsilon(d: int, eps: float) -> None:
    oracle = HadamardResponse(epsilon=eps, domain_size=d)
    assert oracle.audit_probabilities(0, 3).sum() == pytest.approx(1.0)
    assert exact_audit(oracle).epsilon == pytest.approx(eps, rel=1e-9)


def test_audit_events_agree_with_their_exact_probabilities() -> None:
    oracle = HadamardResponse(epsilon=1.0, domain_size=12)
    for v, w in [(2, 9), (9, 2), (0, 11)]:
        z = event_z(oracle, v, w, 50_000, np.random.default_rng(7))
        assert np.max(np.abs(z)) < Z_LIMIT, z


def test_audits_catch_a_leaky_oracle() -> None:
    oracle = LeakyRows(epsilon=1.0, domain_size=8)
    assert exact_audit(oracle).epsilon > 1.5
    assert sampled_audit(oracle, np.random.default_rng(8), samples=50_000, pairs=1).lower_bound > 1


def test_wire_round_trip() -> None:
    oracle = HadamardResponse(epsilon=1.0, domain_size=20)
    batch = oracle.perturb_batch(np.arange(20).repeat(10), np.random.default_rng(1))
    assert np.array_equal(oracle.decode(oracle.encode(batch))["y"], batch["y"])
    assert batch["y"].max() < oracle.K


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ("x", "report"),
        ({}, "y"),
        ({"y": "3"}, "y"),
        ({"y": True}, "y"),
        ({"y": -1}, "y"),
        ({"y": 32}, "y"),
        ({"y": 2.0}, "y"),
    ],
)
def test_malformed_reports_are_rejected(report: object, field: str) -> None:
    with pytest.raises(ReportError, match=rf"reports\[0\]\.{field}"):
        HadamardResponse(epsilon=1.0, domain_size=20).decode([report])


def test_vectors() -> None:
    cases = json.loads(VECTORS.read_text())["cases"]
    for case in cases:
        oracle = HadamardResponse(epsilon=case["epsilon"], domain_size=case["domain_size"])
        assert case["K"] == oracle.K
        assert oracle.p_star == pytest.approx(case["p"], rel=1e-12)
        for member in case["membership"]:
            row = member["value"] + 1
            assert (parity(np.array([row & member["y"]]))[0] == 0) == member["in_set"]
        batch = oracle.decode(case["reports"])
        estimate = oracle.estimate(oracle.support(batch), len(case["reports"]))
        assert estimate.tolist() == pytest.approx(case["estimate"], rel=1e-12)


def test_one_report_from_the_os_csprng_has_the_exact_law() -> None:
    # The SDK's scalar path: each index of the value's row's +1 side with probability
    # p / (K/2), each of its -1 side (1 - p) / (K/2), as perturb_batch draws them.
    from scipy import stats

    from ldptel.client.randomness import SecureRandom

    oracle = HadamardResponse(epsilon=1.0, domain_size=6)
    reports = [oracle.perturb(4, SecureRandom())["y"] for _ in range(40_000)]
    inside = parity(np.arange(oracle.K) & 5) == 0  # row = value + 1
    expected = np.where(inside, oracle.p, 1 - oracle.p) / (oracle.K / 2) * len(reports)
    assert stats.chisquare(np.bincount(reports, minlength=oracle.K), expected).pvalue > 1e-6
