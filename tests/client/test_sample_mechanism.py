"""The Sample mechanism in the local model (ldptel.client.levels.SampleOracle): its epsilon
guarantee, measured by the privacy audit, and its unmixed estimate with its exact variance."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from ldptel.analysis.audit import sampled_audit
from ldptel.analysis.simulation import simulate_levels
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.levels import SampleOracle, sample_probability
from ldptel.client.oracles import make_oracle

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
