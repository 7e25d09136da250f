"""The Sample mechanism in the local model (ldptel.client.levels.SampleOracle): its epsilon
guarantee, measured by the privacy audit, and its unmixed estimate with its exact variance."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.audit import EXACT_TOLERANCE, audit, exact_audit, sampled_audit
from ldptel.analysis.simulation import simulate_levels
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.levels import SampleOracle, sample_probability
from ldptel.client.oracles import ReportBatch, make_oracle
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_bernoulli

T, EPSILON, D = 2.0, 0.5, 4


def test_the_probability_is_the_papers_and_gives_epsilon_exactly() -> None:
    pi = sample_probability(EPSILON, T)
    assert pi == pytest.approx((math.e**EPSILON - 1) / (math.e**T - 1), rel=1e-15)
    oracle = SampleOracle(make_oracle("olh", epsilon=T, domain_size=D), EPSILON)
    assert oracle.epsilon == pytest.approx(EPSILON, rel=1e-12)  # ln(1 + pi (e^t - 1))
    assert sample_probability(T, T) == 1.0 == sample_probability(3.0, T)


def test_the_audit_measures_at_most_epsilon_and_the_exact_de_loss() -> None:
    # With DE inside, the dummy report is uniform (sum_w M(y|w) = 1), so the exact law is
    # P[y | v] = pi M(y|v) + (1 - pi)/d, whose worst ratio is below the proof's bound.
    inner = make_oracle("de", epsilon=T, domain_size=D)
    oracle = SampleOracle(inner, EPSILON)
    pi = oracle.probability
    p = math.exp(T) / (math.exp(T) + D - 1)
    q = (1 - p) / (D - 1)
    exact = math.log((pi * p + (1 - pi) / D) / (pi * q + (1 - pi) / D))
    assert exact <= EPSILON
    audit = sampled_audit(oracle, np.random.default_rng(5), samples=400_000)
    assert audit.lower_bound <= oracle.epsilon
    # The point estimate is the exact loss within sampling error (counts of ~10^5 per event).
    assert audit.epsilon == pytest.approx(exact, abs=0.03)


def test_the_audit_catches_a_sample_probability_too_large() -> None:
    inner = make_oracle("de", epsilon=T, domain_size=D)
    oracle = SampleOracle(inner, EPSILON)
    oracle.probability = 1.0  # every report true: a t-LDP report claimed as EPSILON
    audit = sampled_audit(oracle, np.random.default_rng(6), samples=400_000)
    assert audit.lower_bound > oracle.epsilon


@pytest.mark.parametrize(("name", "d"), [("de", 4), ("hr", 5), ("sue", 4), ("oue", 3)])
def test_the_exact_audit_over_every_output_and_pair_is_at_most_epsilon(name: str, d: int) -> None:
    # Every report the t-oracle can send is an event: the loss is exact over outputs (finer
    # than the inner oracle's pair events, on which the dummy law Q is not constant).
    oracle = SampleOracle(make_oracle(name, epsilon=T, domain_size=d), EPSILON)
    exact = exact_audit(oracle)
    assert exact.pairs == d * (d - 1)
    assert 0.1 < exact.epsilon <= oracle.epsilon * (1 + EXACT_TOLERANCE)
    laws = np.array([oracle.output_law(v) for v in range(d)])
    assert np.allclose(laws.sum(axis=1), 1.0, rtol=1e-12, atol=0)
    # The proof's bound ln(1 + pi (e^t - 1)) holds output by output, for the worst pair too.
    v, w = exact.worst_pair
    assert np.max(np.log(laws[v] / laws[w])) == pytest.approx(exact.epsilon, rel=1e-12)


def test_the_exact_audit_of_sample_de_is_the_closed_form() -> None:
    oracle = SampleOracle(make_oracle("de", epsilon=T, domain_size=D), EPSILON)
    pi = oracle.probability
    p = math.exp(T) / (math.exp(T) + D - 1)
    q = (1 - p) / (D - 1)
    closed = math.log((pi * p + (1 - pi) / D) / (pi * q + (1 - pi) / D))
    assert exact_audit(oracle).epsilon == pytest.approx(closed, rel=1e-12)


class LeakyDummy(SampleOracle):
    """Broken: the dummy report is of the next value, v + 1 mod d, so it depends on v."""

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        values = np.asarray(values, dtype=np.int64)
        true = sample_bernoulli(rng, self.probability, values.size)
        fed = np.where(true, values, (values + 1) % self.domain_size)
        return self.inner.perturb_batch(fed, rng)

    def output_law(self, value: int) -> NDArray[np.float64]:
        following = self.inner.output_law((value + 1) % self.domain_size)
        mixed = self.probability * self.inner.output_law(value)
        return np.asarray(mixed + (1 - self.probability) * following, dtype=np.float64)


def test_both_audits_catch_a_dummy_that_depends_on_the_value() -> None:
    oracle = LeakyDummy(make_oracle("de", epsilon=T, domain_size=D), EPSILON)
    result = audit(oracle, np.random.default_rng(9), samples=50_000)
    assert result.violated
    assert result.exact_epsilon is not None and result.exact_epsilon > 1.5  # ~ t, not 0.5
    assert result.sampled_lower_bound is not None and result.sampled_lower_bound > EPSILON


def test_the_exact_audit_catches_a_sample_probability_too_large() -> None:
    oracle = SampleOracle(make_oracle("sue", epsilon=T, domain_size=D), EPSILON)
    oracle.probability = 1.0  # every report true: a t-LDP report claimed as EPSILON
    assert exact_audit(oracle).epsilon == pytest.approx(T, rel=1e-9)


def test_the_sample_mechanism_draws_with_the_exact_samplers() -> None:
    # A pi-coin and a uniform dummy from the exact samplers: the reported values' law is
    # pi [y = v] + (1 - pi)/d, within a chi-square bound (false failure 1e-4).
    inner = make_oracle("de", epsilon=20.0, domain_size=D)  # keeps its input w.p. ~1 - 1e-8
    oracle = SampleOracle(inner, 0.7)
    reports = oracle.perturb_batch(np.zeros(40_000, dtype=np.int64), np.random.default_rng(4))
    counts = np.bincount(reports["y"], minlength=D)
    expected = 40_000 * np.array([oracle.output_law(0)[y] for y in range(D)])
    statistic = float(((counts - expected) ** 2 / expected).sum())
    assert statistic < stats.chi2.ppf(1 - 1e-4, D - 1)


def config(oracle: str = "olh", t: float = T, epsilon: float = EPSILON) -> CampaignConfig:
    return CampaignConfig.from_dict(
        {"name": "s", "oracle": oracle, "epsilon": t, "domain": [f"v{i}" for i in range(8)],
         "levels": {"high": epsilon, "low": t}, "level_strategy": "threshold",
         "level_threshold": t}
    )  # fmt: skip


def test_sample_is_simulated_but_not_a_campaign_strategy() -> None:
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict({**config().to_dict(), "level_strategy": "sample"})
    assert error.value.field == "level_strategy"
    sample = replace(config(), level_strategy="sample")
    assert isinstance(sample.level_oracle("high"), SampleOracle)
    assert not isinstance(sample.level_oracle("low"), SampleOracle)  # at t: every report true
    assert sample.reporting_epsilon("high") == EPSILON


# OLH at t = 2: the t-oracle's noise dominates; DE at t = 3, eps = 2.5: the dummies' (the
# mixing term) is 40% of the sampled level's variance.
@pytest.mark.parametrize(("oracle", "t", "epsilon"), [("olh", T, EPSILON), ("de", 3.0, 2.5)])
def test_the_combined_estimate_is_unbiased_with_its_stated_variance(
    oracle: str, t: float, epsilon: float
) -> None:
    sample = replace(config(oracle, t, epsilon), level_strategy="sample")
    counts = {
        "high": np.array([3000, 2000, 1000, 500, 0, 0, 0, 0]),
        "low": np.array([60, 40, 20, 10, 0, 0, 0, 0]),
    }
    truth = counts["high"] + counts["low"]
    rng = np.random.default_rng(8)
    repetitions = 300
    runs = [simulate_levels(sample, counts, rng).combination for _ in range(repetitions)]
    estimates = np.array([run.estimate for run in runs])
    stated = runs[0].variance(truth / truth.sum())  # the weights depend only on the n_l
    # Mean: within 4 standard errors of the mean (Bonferroni-ish over 8 items).
    z = (estimates.mean(axis=0) - truth) / np.sqrt(stated / repetitions)
    assert np.max(np.abs(z)) < 4, z
    ratio = estimates.var(axis=0, ddof=1) / stated
    low, high = stats.chi2.ppf([1e-3 / 16, 1 - 1e-3 / 16], repetitions - 1) / (repetitions - 1)
    assert np.all((low < ratio) & (ratio < high)), ratio
