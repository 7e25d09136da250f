"""Numeric mechanisms through their real code: the mean unbiased with exactly the stated
variance, 95% intervals covering, dBitFlip's histogram unbiased, SW's EMS distribution close,
and the audits keeping every mechanism's claim while catching broken ones.

Tolerances: a z-score bound of 4 (false failure 6e-5), chi-square quantiles at 1e-4 each
side, binomial coverage bounds at 1e-4; every draw is seeded, so a run is reproducible."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.numeric import (
    audit_numeric,
    level_fractions,
    read_values,
    simulate_numeric,
    synthetic_values,
)
from ldptel.client.errors import ParameterError
from ldptel.client.numeric import NUMERIC_MECHANISMS, NumericMechanism, make_mechanism
from ldptel.client.numeric.band import Piecewise, light_weight
from ldptel.client.numeric.dbitflip import DBitFlip
from ldptel.client.numeric.duchi import Duchi
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below

NAMES = sorted(n for n in NUMERIC_MECHANISMS if n != "auto")
LOW, HIGH = 0.0, 100.0
REPEATS, PER_REPEAT = 1000, 200
Z_BOUND = 4.0
TAIL = 1e-4


def latencies(n: int, seed: int = 5) -> NDArray[np.float64]:
    return synthetic_values("lognormal", n, LOW, HIGH, np.random.default_rng(seed))


def build(name: str, epsilon: float = 1.0, **params: Any) -> NumericMechanism:
    defaults = {"resolution": 15, "sampled": 4} if name == "dbitflip" else {}
    return make_mechanism(name, epsilon=epsilon, low=LOW, high=HIGH, **{**defaults, **params})


def repeated_estimates(
    mechanism: NumericMechanism, values: NDArray[np.float64], rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(mean estimate, estimated variance) of REPEATS independent runs over `values`."""
    batch = mechanism.perturb_batch(np.tile(values, REPEATS), rng)
    n = values.size
    estimates, variances = [], []
    for r in range(REPEATS):
        part = {name: column[r * n : (r + 1) * n] for name, column in batch.items()}
        support = mechanism.support(part)
        estimates.append(mechanism.mean(support, n))
        variances.append(mechanism.mean_variance_estimate(support, n))
    return np.array(estimates), np.array(variances)


#: The default case, and a coarse grid at a large epsilon, where the rounding's own variance is
#: a large share of a report's (dbitflip's stated stderr missed it: 87% coverage at K = 3).
CASES = [(name, 1.0, {}) for name in NAMES] + [
    (name, 8.0, {"resolution": 3, **({"sampled": 4} if name == "dbitflip" else {})})
    for name in NAMES
]


@pytest.mark.parametrize(("name", "epsilon", "params"), CASES)
def test_the_mean_is_unbiased_with_exactly_the_stated_variance(
    name: str, epsilon: float, params: dict[str, Any]
) -> None:
    mechanism = build(name, epsilon, **params)
    values = latencies(PER_REPEAT)
    truth = float(mechanism.clip(values).mean())
    variance = mechanism.mean_variance(PER_REPEAT, values)
    estimates, estimated = repeated_estimates(mechanism, values, np.random.default_rng(11))

    z = (estimates.mean() - truth) / math.sqrt(variance / REPEATS)
    assert abs(z) < Z_BOUND
    ratio = (REPEATS - 1) * estimates.var(ddof=1) / variance
    chi2 = stats.chi2(REPEATS - 1)
    assert chi2.ppf(TAIL) < ratio < chi2.ppf(1 - TAIL)
    # The worst case bounds the variance of these values.
    assert variance <= mechanism.mean_variance(PER_REPEAT) * (1 + 1e-12)
    # 95% intervals from the reports' own variance estimate cover ~95% (conservative allowed).
    covered = int(np.sum(np.abs(estimates - truth) <= 1.96 * np.sqrt(estimated)))
    assert covered >= stats.binom(REPEATS, 0.95).ppf(TAIL)


def test_dbitflip_histogram_is_unbiased_with_its_exact_variance() -> None:
    mechanism = build("dbitflip", 1.0)
    assert isinstance(mechanism, DBitFlip)
    values = synthetic_values("bimodal", 40_000, LOW, HIGH, np.random.default_rng(3))
    result = simulate_numeric(mechanism, values, np.random.default_rng(4))
    assert result.distribution is not None
    # Per value the level is s or s + 1: p_t(x) its probabilities; E[f_t] = mean_x p_t(x).
    below, fraction = mechanism.positions(values)
    d, n = mechanism.buckets, values.size
    p = np.zeros((n, d))
    p[np.arange(n), below] = 1 - fraction
    p[np.arange(n), below + 1] += fraction
    ratio = d / mechanism.sampled
    noise = mechanism.heavy * mechanism.light / (mechanism.heavy - mechanism.light) ** 2
    variance = (ratio * (noise + p) - p * p).sum(axis=0) / n**2
    z = (result.distribution.raw - p.mean(axis=0)) / np.sqrt(variance)
    # Bonferroni over the d buckets: each at 6e-5 / 16.
    assert np.max(np.abs(z)) < stats.norm.isf(6e-5 / d / 2)
    np.testing.assert_allclose(p.mean(axis=0), result.true_probabilities, atol=1e-12)


def test_square_wave_ems_recovers_the_distribution() -> None:
    mechanism = build("sw", 2.0)
    values = synthetic_values("bimodal", 100_000, LOW, HIGH, np.random.default_rng(8))
    result = simulate_numeric(mechanism, values, np.random.default_rng(9))
    estimate = result.distribution
    assert estimate is not None
    assert estimate.probabilities.min() >= 0
    assert estimate.probabilities.sum() == pytest.approx(1.0)
    assert estimate.cdf[-1] == pytest.approx(1.0)
    # Regression bounds (measured at this seed: W1 ~ 0.2, medians 0.1 apart), ~5x slack;
    # EMS's smoothing has no closed-form error to derive a bound from.
    assert result.wasserstein is not None and result.wasserstein < 1.0
    assert estimate.quantile(0.5) == pytest.approx(float(np.median(values)), abs=1.0)
    # The mean stays the unbiased band estimate, not EMS's smoothed one.
    assert abs(result.estimate - result.true_mean) < Z_BOUND * result.stderr


# -- the audits -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_mechanism_keeps_its_claim_exactly_and_sampled(name: str) -> None:
    mechanism = build(name, 1.0)
    result = audit_numeric(mechanism, np.random.default_rng(2), samples=20_000, exact_pairs=64)
    assert not result.violated
    assert result.exact_epsilon == pytest.approx(mechanism.epsilon, rel=1e-9)
    for epsilon in (0.1, 8.0):
        assert not audit_numeric(
            build(name, epsilon), np.random.default_rng(0), samples=100
        ).violated


class OverclaimingPiecewise(Piecewise):
    """PM with the weights of epsilon = 2 that claims its requested epsilon = 1."""

    @property
    def epsilon(self) -> float:
        return self.requested_epsilon


class LeakyDuchi(Duchi):
    """Duchi whose draw uses a quarter of its base A: its parameters (and so the exact
    audit) are honest, its reports are not."""

    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        u = sample_uniform_below(rng, self.total, levels.size)
        return {"y": (u < self.base // 4 + self.step * levels).astype(np.uint16)}


class PeekingDBitFlip(DBitFlip):
    """dBitFlip that always samples the value's own bucket: the sampled set now depends on
    the value, which only the sampled audit sees."""

    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        batch = super().perturb_levels(levels, rng)
        own = levels.astype(np.uint16)
        has = (batch["j"] == own[:, None]).any(axis=1)
        batch["j"][~has, 0] = own[~has]  # its bit keeps the other-bucket law: only j leaks
        return batch


def test_the_audits_catch_broken_mechanisms() -> None:
    rng = np.random.default_rng(6)
    overclaiming = OverclaimingPiecewise(
        epsilon=1.0, low=LOW, high=HIGH, light=light_weight(2**30, 2.0)
    )
    result = audit_numeric(overclaiming, rng, samples=20_000, exact_pairs=16)
    assert result.violated
    assert result.exact_epsilon == pytest.approx(2.0, rel=1e-6)
    assert result.sampled_lower_bound is not None and result.sampled_lower_bound > 1.0

    leaky = audit_numeric(LeakyDuchi(epsilon=1.0, low=LOW, high=HIGH), rng, samples=20_000)
    assert leaky.violated
    assert leaky.exact_epsilon == pytest.approx(1.0, rel=1e-6)  # the parameters are honest

    peeking = PeekingDBitFlip(epsilon=1.0, low=LOW, high=HIGH, resolution=15, sampled=2)
    caught = audit_numeric(peeking, rng, samples=20_000, sampled_pairs=2)
    assert caught.violated and caught.sampled_lower_bound is not None
    assert caught.exact_epsilon is not None and caught.exact_epsilon <= 1.0 + 1e-9


# -- inputs -----------------------------------------------------------------------------------


def test_synthetic_values_have_their_shapes() -> None:
    rng = np.random.default_rng(1)
    lognormal = synthetic_values("lognormal", 100_000, 0.0, 1000.0, rng)
    assert float(np.median(lognormal)) == pytest.approx(100.0, rel=0.02)
    assert 0.001 < float(np.mean(lognormal > 1000.0)) < 0.006  # a clipped tail
    bimodal = synthetic_values("bimodal", 100_000, 0.0, 1.0, rng)
    assert float(np.mean(bimodal < 0.5)) == pytest.approx(0.6, abs=0.01)
    with pytest.raises(ParameterError, match="distribution"):
        synthetic_values("zipf", 10, 0.0, 1.0, rng)


def test_values_files_hold_one_number_per_line() -> None:
    np.testing.assert_array_equal(read_values(["1.5", "", " -2 ", "1e3"]), [1.5, -2.0, 1000.0])
    with pytest.raises(ParameterError, match="line 2"):
        read_values(["1", "abc"])
    with pytest.raises(ParameterError, match="no numbers"):
        read_values(["", " "])


def test_level_fractions_split_each_value_between_its_two_levels() -> None:
    mechanism = build("sw", 1.0, resolution=4)  # levels 0, 25, 50, 75, 100
    np.testing.assert_allclose(
        level_fractions(mechanism, [10.0, 50.0, 200.0]), [0.6 / 3, 0.4 / 3, 1 / 3, 0, 1 / 3]
    )
