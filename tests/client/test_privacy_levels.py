"""Personalized privacy on the client side: campaign levels and their validation, the
reporting-epsilon rule of each strategy, each level's oracle and its privacy audit, and the
combined estimate: unbiased, with exactly the variance it reports (statistical checks with
fixed seeds and tolerances from theory, each shown able to fail)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.audit import audit, exact_audit
from ldptel.analysis.simulation import plan_levels, simulate_levels, simulate_support, split_users
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.levels import MAX_LEVELS, Combination, LevelPart, combine
from ldptel.client.oracles import FrequencyOracle

LEVELS = {"high": 0.25, "medium": 1.0, "low": 3.0}
USERS = {"high": 3000, "medium": 2000, "low": 500}
FREQUENCIES = np.array([0.5, 0.2, 0.1, 0.1, 0.1, 0.0])
#: Each statistical check fails a correct estimator with probability <= ALPHA (Bonferroni
#: over the items inside).
ALPHA = 1e-4
TRIALS = 400


def config_of(oracle: str = "de", **changes: Any) -> CampaignConfig:
    data: dict[str, Any] = {
        "name": "leveled",
        "oracle": oracle,
        "epsilon": 3.0,
        "domain": [f"v{i}" for i in range(FREQUENCIES.size)],
        "levels": LEVELS,
        **changes,
    }
    return CampaignConfig.from_dict(data)


def oracle_of(config: CampaignConfig, level: str) -> FrequencyOracle:
    oracle = config.level_oracle(level)
    assert oracle is not None
    return oracle


# -- configs -------------------------------------------------------------------------------


def test_levels_are_part_of_the_config_id_and_absent_without_levels() -> None:
    plain = config_of(levels={})
    assert "levels" not in plain.canonical_json()  # ids of configs without levels unchanged
    leveled = config_of()
    assert '"levels":{"high":0.25,"low":3,"medium":1}' in leveled.canonical_json()  # RFC 8785
    assert leveled.config_id != plain.config_id
    assert config_of(levels={**LEVELS, "high": 0.3}).config_id != leveled.config_id
    assert config_of(level_strategy="minimum").config_id != leveled.config_id
    again = CampaignConfig.from_dict(json_of(leveled))
    assert again == leveled and again.config_id == leveled.config_id


def json_of(config: CampaignConfig) -> Any:
    import json

    return json.loads(config.canonical_json())


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"levels": ["high"]}, "levels"),
        ({"levels": {"": 1.0}}, "levels"),
        ({"levels": {"High": 1.0}}, "levels"),
        ({"levels": {"x" * 33: 1.0}}, "levels"),
        ({"levels": {f"l{i}": 1.0 for i in range(MAX_LEVELS + 1)}}, "levels"),
        ({"levels": {"high": 0.0}}, "levels.high"),
        ({"levels": {"high": math.inf}}, "levels.high"),
        ({"levels": {"high": "1"}}, "levels.high"),
        ({"levels": {"high": 4.0}}, "levels"),  # above the campaign's epsilon, its ceiling
        ({"level_strategy": "best"}, "level_strategy"),
        ({"levels": {}, "level_strategy": "minimum"}, "level_strategy"),
        ({"level_strategy": "threshold"}, "level_threshold"),
        ({"level_strategy": "threshold", "level_threshold": 5.0}, "level_threshold"),
        ({"level_threshold": 1.0}, "level_threshold"),
    ],
)
def test_invalid_levels_are_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ParameterError) as error:
        config_of(**changes)
    assert error.value.field == field


def test_each_level_gets_the_configs_oracle_at_its_epsilon_with_derived_parameters() -> None:
    config = config_of("olh")
    oracles = {level: oracle_of(config, level) for level in LEVELS}
    assert {level: o.epsilon for level, o in oracles.items()} == pytest.approx(LEVELS)
    # OLH's g = round(e^eps + 1) is derived per level...
    assert [oracles[level].g for level in ("high", "medium", "low")] == [2, 4, 21]  # type: ignore[attr-defined]
    # ... unless the config fixes it for all.
    fixed = config_of("olh", params={"g": 4})
    assert {oracle_of(fixed, level).g for level in LEVELS} == {4}  # type: ignore[attr-defined]


# -- the reporting rule --------------------------------------------------------------------


def test_the_reporting_epsilon_of_each_strategy() -> None:
    def rule(**changes: Any) -> dict[str, float | None]:
        config = config_of(**changes)
        return {level: config.reporting_epsilon(level) for level in LEVELS}

    assert rule() == LEVELS
    assert rule(level_strategy="minimum") == dict.fromkeys(LEVELS, 0.25)
    threshold = rule(level_strategy="threshold", level_threshold=1.0)
    assert threshold == {"high": None, "medium": 1.0, "low": 1.0}
    assert config_of(level_strategy="threshold", level_threshold=1.0).level_oracle("high") is None


def test_the_level_is_required_with_levels_and_refused_without() -> None:
    config = config_of()
    for bad in ("", "extreme"):
        with pytest.raises(ParameterError, match="level"):
            config.reporting_epsilon(bad)
    plain = config_of(levels={})
    assert plain.reporting_epsilon() == 3.0
    with pytest.raises(ParameterError, match="no privacy levels"):
        plain.reporting_epsilon("high")


# -- privacy: each level's reports satisfy its epsilon ------------------------------------


@pytest.mark.parametrize("oracle", ["de", "olh", "oue"])
def test_each_levels_reports_satisfy_that_levels_epsilon_in_the_audit(oracle: str) -> None:
    config = config_of(oracle)
    for number, level in enumerate(LEVELS):
        result = audit(oracle_of(config, level), np.random.default_rng(number), samples=20_000)
        assert not result.violated, (level, result)
        assert result.claimed_epsilon == pytest.approx(LEVELS[level])
        assert result.exact_epsilon is not None
        assert result.exact_epsilon <= LEVELS[level] * (1 + 1e-9)


def test_the_audit_catches_a_level_randomized_with_another_levels_epsilon() -> None:
    """A client (or a collector) that used level low's oracle for a user at level high gives
    that user a loss of 3 where 0.25 was promised: the audit measures it."""
    config = config_of()
    leaked = exact_audit(oracle_of(config, "low"))
    assert leaked.epsilon > LEVELS["high"] * 10
    assert leaked.epsilon == pytest.approx(LEVELS["low"])


# -- the combined estimate -----------------------------------------------------------------


def level_counts(users: dict[str, int]) -> dict[str, NDArray[np.int64]]:
    """Every level holds the items in exactly the proportions FREQUENCIES (the combination's
    assumption), so the total true count is FREQUENCIES * n."""
    return {level: np.round(FREQUENCIES * n).astype(np.int64) for level, n in users.items()}


def combined_trials(
    config: CampaignConfig, trials: int, seed: int, wrong_oracle: bool = False
) -> tuple[NDArray[np.float64], Combination]:
    """`trials` independent combined estimates (perturbed through the oracles' own code);
    with `wrong_oracle`, level medium is estimated with level low's oracle (a bug)."""
    rng = np.random.default_rng(seed)
    counts = level_counts(USERS)
    estimates = []
    combination = None
    for _ in range(trials):
        parts = []
        for level, level_counts_ in counts.items():
            oracle = oracle_of(config, level)
            n = int(level_counts_.sum())
            support = simulate_support(oracle, level_counts_, rng)
            used = oracle_of(config, "low") if wrong_oracle and level == "medium" else oracle
            parts.append(LevelPart(level, oracle, n, used.estimate(support, n)))
        combination = combine(parts)
        estimates.append(combination.estimate)
    assert combination is not None
    return np.array(estimates), combination


def unbiased(estimates: NDArray[np.float64], truth: NDArray[np.float64], variance: Any) -> bool:
    """Mean of the trials within the normal quantile of ALPHA / d (two-sided, Bonferroni) of
    the truth, in standard errors of the mean."""
    z = (estimates.mean(axis=0) - truth) / np.sqrt(variance / len(estimates))
    return bool(np.all(np.abs(z) < stats.norm.isf(ALPHA / (2 * truth.size))))


def variance_right(estimates: NDArray[np.float64], variance: Any) -> bool:
    """Each item's sample variance / claimed variance inside the chi-square(R - 1) interval
    at level ALPHA / d."""
    trials, d = estimates.shape
    ratio = estimates.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf([ALPHA / (2 * d), 1 - ALPHA / (2 * d)], trials - 1) / (trials - 1)
    return bool(np.all((low < ratio) & (ratio < high)))


@pytest.fixture(scope="module")
def trials() -> tuple[NDArray[np.float64], Combination]:
    return combined_trials(config_of(), TRIALS, seed=11)


def test_the_combined_estimate_is_unbiased_for_the_total_count(
    trials: tuple[NDArray[np.float64], Combination],
) -> None:
    estimates, combination = trials
    n = sum(USERS.values())
    assert combination.n == n
    assert unbiased(estimates, FREQUENCIES * n, combination.variance(FREQUENCIES))


def test_the_combined_estimate_has_the_variance_it_reports(
    trials: tuple[NDArray[np.float64], Combination],
) -> None:
    estimates, combination = trials
    assert variance_right(estimates, combination.variance(FREQUENCIES))
    # At f_v = 0 it is n^2 / sum_l 1/Var0(f^_l), the inverse-variance combination's.
    np.testing.assert_allclose(combination.variance(None), combination.null_variance)


def test_the_checks_catch_a_level_estimated_with_the_wrong_oracle() -> None:
    estimates, combination = combined_trials(config_of(), 100, seed=12, wrong_oracle=True)
    n = sum(USERS.values())
    assert not unbiased(estimates, FREQUENCIES * n, combination.variance(FREQUENCIES))


def test_the_checks_catch_a_wrong_variance(
    trials: tuple[NDArray[np.float64], Combination],
) -> None:
    estimates, combination = trials
    # A classic slip: the weights not squared, sum_l w_l Var(f^_l) instead of w_l^2.
    unsquared = sum(
        combination.weights[p.level] * p.oracle.variance(p.n, FREQUENCIES) / p.n**2
        for p in combination.parts
    )
    assert not variance_right(estimates, combination.n**2 * unsquared)


def test_inverse_variance_weights_beat_pooling_and_every_level_alone() -> None:
    config = config_of()
    parts = [
        LevelPart(level, oracle_of(config, level), n, np.zeros(FREQUENCIES.size))
        for level, n in USERS.items()
    ]
    optimal = combine(parts).null_variance
    n = sum(USERS.values())
    # Pooling (weights n_l / n) is unbiased too, but worse when epsilons differ.
    pooled = sum((p.n / n) ** 2 * p.oracle.variance(p.n, None) / p.n**2 for p in parts) * n**2
    assert np.all(optimal < pooled)
    for p in parts:
        assert np.all(optimal < p.oracle.variance(p.n, None) * (n / p.n) ** 2)


def test_a_level_without_reports_is_left_out_and_none_at_all_is_an_error() -> None:
    config = config_of()
    empty = LevelPart("high", oracle_of(config, "high"), 0, np.zeros(FREQUENCIES.size))
    some = LevelPart("low", oracle_of(config, "low"), 10, np.ones(FREQUENCIES.size))
    combination = combine([empty, some])
    assert set(combination.weights) == {"low"}
    np.testing.assert_allclose(combination.estimate, np.ones(FREQUENCIES.size))
    with pytest.raises(ParameterError):
        combine([empty])


# -- simulation and planning ---------------------------------------------------------------


def test_users_split_by_fractions_sum_to_n() -> None:
    assert split_users(10, {"a": 0.54, "b": 0.37, "c": 0.09}) == {"a": 5, "b": 4, "c": 1}
    parts = split_users(1_000_003, {"a": 0.54, "b": 0.37, "c": 0.09})
    assert sum(parts.values()) == 1_000_003


def test_simulated_levels_follow_the_configs_rule_and_match_the_plan() -> None:
    config = config_of(level_strategy="threshold", level_threshold=1.0)
    result = simulate_levels(config, level_counts(USERS), np.random.default_rng(3))
    combination = result.combination
    assert {p.level for p in combination.parts} == {"medium", "low"}
    assert [p.oracle.epsilon for p in combination.parts] == pytest.approx([1.0, 1.0])
    np.testing.assert_array_equal(result.reporting_counts, level_counts({"x": 2500})["x"])
    fractions = {level: n / sum(USERS.values()) for level, n in USERS.items()}
    [plan] = [
        p for p in plan_levels(config, fractions) if (p.strategy, p.threshold) == ("threshold", 1.0)
    ]
    assert plan.reporting_fraction == pytest.approx(2500 / 5500)
    # The plan's variance is the simulated combination's, per user over all users.
    frequency_variance = np.max(combination.null_variance) / combination.n**2
    assert plan.stderr(5500) ** 2 == pytest.approx(frequency_variance)


def test_the_plan_ranks_optimal_first_and_minimum_is_one_epsilon_for_all() -> None:
    config = config_of()
    fractions = {"high": 0.54, "medium": 0.37, "low": 0.09}
    plans = {(p.strategy, p.threshold): p for p in plan_levels(config, fractions)}
    assert set(plans) == {
        ("optimal", None), ("minimum", None), ("threshold", 1.0), ("threshold", 3.0),
        ("sample", 1.0), ("sample", 3.0),
    }  # fmt: skip
    optimal = plans[("optimal", None)].variance_per_user
    assert all(p.variance_per_user >= optimal for p in plans.values())
    minimum = plans[("minimum", None)]
    assert list(minimum.epsilons.values()) == pytest.approx([0.25] * 3)
    single = oracle_of(replace(config, levels={"all": 0.25}), "all")
    assert minimum.variance_per_user == pytest.approx(float(np.max(single.variance(1, None))))
