"""THE: exact p* and q* from the grid law, the variance-minimizing threshold, unbiasedness and
variance vs theory, vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from contract_checks import Z_LIMIT, variance_ratios, z_scores
from numpy.typing import NDArray

from ldptel.analysis.audit import exact_audit
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.base import PureOracle, ReportBatch
from ldptel.client.oracles.the import ThresholdHistogramEncoding

VECTORS = Path(__file__).parents[2] / "vectors" / "the.json"
COUNTS = np.array([4000, 2500, 1500, 1000, 600, 300, 100, 0], dtype=np.int64)


def tail(a: float, m: int) -> float:
    """P(N >= m) for the discrete Laplace P(k) = (1-a)/(1+a) a^|k|."""
    return a**m / (1 + a) if m >= 0 else 1 - a ** (1 - m) / (1 + a)


def pure_probabilities(eps: float, R: int, t: int) -> tuple[float, float]:
    a = math.exp(-eps / (2 * R))
    return tail(a, t + 1 - R), tail(a, t + 1)  # P(R + N > t), P(N > t)


class OffByOneThreshold(ThresholdHistogramEncoding):
    """Counts z >= t while p* and q* are for z > t."""

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return np.asarray((batch["z"] >= self.threshold).sum(axis=0), dtype=np.int64)


class UnsquaredVariance(ThresholdHistogramEncoding):
    """Eq. (2) with (p* - q*) where (p* - q*)^2 belongs."""

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        return super().variance(n, frequencies) * (self.p_star - self.q_star)


def test_registered_as_the_and_pure() -> None:
    oracle = make_oracle("the", epsilon=1.0, domain_size=8)
    assert isinstance(oracle, ThresholdHistogramEncoding) and isinstance(oracle, PureOracle)


@pytest.mark.parametrize(("eps", "R"), [(0.5, 64), (1.0, 64), (4.0, 16), (2.0, 3)])
def test_pure_probabilities_are_the_discrete_laplace_tails(eps: float, R: int) -> None:
    oracle = ThresholdHistogramEncoding(epsilon=eps, domain_size=4, resolution=R)
    p, q = pure_probabilities(eps, R, oracle.threshold)
    assert (oracle.p_star, oracle.q_star) == pytest.approx((p, q), rel=1e-9)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("R", [2, 5, 64])
def test_the_default_threshold_minimizes_the_exact_variance(eps: float, R: int) -> None:
    oracle = ThresholdHistogramEncoding(epsilon=eps, domain_size=4, resolution=R)
    # Every integer threshold of theta in (1/2, 1), variance from the textbook tails.
    candidates = range(R // 2, R)
    variance = {}
    for t in candidates:
        p, q = pure_probabilities(eps, R, t)
        variance[t] = q * (1 - q) / (p - q) ** 2
    best = min(variance.values())
    assert variance[oracle.threshold] == pytest.approx(best, rel=1e-9)
    assert oracle.variance(1)[0] == pytest.approx(best, rel=1e-9)
    assert np.argmin(oracle.threshold_variances()) == oracle.threshold - R // 2


def test_the_default_threshold_approaches_the_papers_optimum() -> None:
    # Wang et al. 2017: at eps = 1 the best theta is about 0.62, Var/n about 4.807.
    oracle = ThresholdHistogramEncoding(epsilon=1.0, domain_size=4, resolution=256)
    assert oracle.threshold / 256 == pytest.approx(0.619, abs=2 / 256)
    assert oracle.variance(1)[0] == pytest.approx(4.807, rel=1e-3)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_the_default_grid_thresholds_below_the_papers_variance_and_is_not_sue(eps: float) -> None:
    oracle = ThresholdHistogramEncoding(epsilon=eps, domain_size=4)
    paper = ThresholdHistogramEncoding(epsilon=eps, domain_size=4, resolution=256)
    assert oracle.resolution == 2 and oracle.variance(1)[0] < paper.variance(1)[0]
    # On the unit grid, z > 0 is randomized response on each bit: p* = 1 - q*, SUE's law.
    unit = ThresholdHistogramEncoding(epsilon=eps, domain_size=4, resolution=1)
    assert unit.p_star + unit.q_star == pytest.approx(1.0, abs=1e-12)
    assert unit.p_star == pytest.approx(make_oracle("sue", epsilon=eps, domain_size=4).p_star)
    assert oracle.p_star + oracle.q_star != pytest.approx(1.0, abs=1e-3)


def test_theta_picks_the_threshold_floor_theta_r() -> None:
    oracle = ThresholdHistogramEncoding(epsilon=1.0, domain_size=4, resolution=64, theta=0.75)
    assert oracle.threshold == 48 and oracle.theta == 0.75
    low = ThresholdHistogramEncoding(epsilon=1.0, domain_size=4, resolution=64, theta=0.51)
    assert low.threshold == 32


@pytest.mark.parametrize("theta", [0.5, 1.0, 0.2, 1.5, float("nan"), float("inf"), "0.6", True])
def test_theta_is_validated(theta: object) -> None:
    with pytest.raises(ParameterError, match="theta"):
        ThresholdHistogramEncoding(epsilon=1.0, domain_size=4, theta=theta)  # type: ignore[arg-type]


def test_the_guarantee_is_the_reports() -> None:
    # Thresholding happens at the aggregator; the client sends all of z.
    oracle = ThresholdHistogramEncoding(epsilon=2.0, domain_size=5)
    assert oracle.epsilon == pytest.approx(2.0, rel=1e-9)
    assert exact_audit(oracle).epsilon == pytest.approx(2.0, rel=1e-9)


def test_support_counts_values_above_the_threshold() -> None:
    oracle = ThresholdHistogramEncoding(epsilon=1.0, domain_size=3, resolution=64, theta=0.75)
    batch = {"z": np.array([[48, 49, -100], [64, 0, 49]], dtype=np.int32)}
    assert oracle.support(batch).tolist() == [1, 1, 1]


@pytest.mark.parametrize(("eps", "R"), [(1.0, 64), (4.0, 64), (1.0, 8)])
def test_estimates_are_unbiased_within_their_standard_errors(eps: float, R: int) -> None:
    oracle = ThresholdHistogramEncoding(epsilon=eps, domain_size=COUNTS.size, resolution=R)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(31))
    assert np.max(np.abs(z)) < Z_LIMIT, z


def test_the_unbiasedness_check_catches_an_off_by_one_threshold() -> None:
    oracle = OffByOneThreshold(epsilon=1.0, domain_size=COUNTS.size, resolution=8)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(31))
    assert np.max(np.abs(z)) > Z_LIMIT


def test_variance_matches_the_exact_formula() -> None:
    oracle = ThresholdHistogramEncoding(epsilon=2.0, domain_size=COUNTS.size)
    ratios, (low, high) = variance_ratios(oracle, COUNTS // 4, 300, np.random.default_rng(32))
    assert np.all((low < ratios) & (ratios < high)), ratios


def test_the_variance_check_catches_an_unsquared_denominator() -> None:
    oracle = UnsquaredVariance(epsilon=2.0, domain_size=COUNTS.size)
    ratios, (low, high) = variance_ratios(oracle, COUNTS // 4, 300, np.random.default_rng(32))
    assert not np.any((low < ratios) & (ratios < high)), ratios


def test_vectors() -> None:
    data = json.loads(VECTORS.read_text())
    for case in data["cases"]:
        oracle = ThresholdHistogramEncoding(
            epsilon=case["epsilon"],
            domain_size=case["domain_size"],
            resolution=case["resolution"],
            theta=case["theta"],
        )
        assert oracle.threshold == case["threshold"]
        assert (oracle.p_star, oracle.q_star) == pytest.approx(
            (case["p_star"], case["q_star"]), rel=1e-12
        )
        z = np.array([case["z"]], dtype=np.int32)
        assert oracle.encode({"z": z}) == [case["report"]]
        assert oracle.support(oracle.decode([case["report"]])).tolist() == case["support"]
