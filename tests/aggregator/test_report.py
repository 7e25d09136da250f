"""Reports: their JSON shape, "not enough reports", consistency, significance and the
shuffle-amplified privacy guarantee."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from stream_entries import make_config, register, simulate

from ldptel.aggregator.consistency import consistent, norm_mul, norm_sub
from ldptel.aggregator.privacy import shuffle_amplification
from ldptel.aggregator.report import (
    NOT_ENOUGH,
    ReportOptions,
    build_window,
    load_window,
    privacy_sentences,
    significance_z,
)
from ldptel.aggregator.worker import Worker
from ldptel.client.errors import ParameterError
from ldptel.client.shuffle import closed_form_epsilon, default_delta, shuffled_epsilon
from ldptel.store.registry import Registry
from ldptel.store.reports import parse_window

WINDOW = 1_700_006_400
ITEM_FIELDS = {
    "item", "index", "estimate", "variance", "stderr", "ci_low", "ci_high", "consistent",
    "threshold", "significant",
}  # fmt: skip


def aggregated(client: Any, n: int, **config: Any) -> Any:
    campaign = make_config(**config)
    register(client, campaign)
    values = np.random.default_rng(5).choice(8, size=n, p=[0.4, 0.3, 0.1, 0.1, 0.1, 0, 0, 0])
    if n:
        simulate(client, campaign, values, window=WINDOW)
    Worker(client).run_pass()
    return campaign


def test_the_stored_report_has_every_documented_field(redis_client: Any) -> None:
    config = aggregated(redis_client, 5000)

    document = load_window(redis_client, config.name, WINDOW)

    assert document is not None
    json.dumps(document, allow_nan=False)  # plain JSON, no NaN/Infinity
    assert set(document) == {"campaign", "window", "built_at", "reports"}
    assert document["window"] == {
        "start": "2023-11-15T00:00:00Z", "end": "2023-11-16T00:00:00Z",
        "start_unix": WINDOW, "seconds": 86_400,
    }  # fmt: skip
    (report,) = document["reports"]
    assert report["campaign"] == config.name
    assert report["config_id"] == config.config_id
    assert (report["oracle"], report["epsilon"], report["n"]) == ("de", 1.0, 5000)
    assert report["status"] == "ok" and report["built_at"].endswith("Z")
    assert [item["item"] for item in report["items"]] == list(config.domain)
    for item in report["items"]:
        assert set(item) == ITEM_FIELDS
        assert item["ci_low"] < item["estimate"] < item["ci_high"]
        assert item["stderr"] == pytest.approx(math.sqrt(item["variance"]))
    assert sum(item["consistent"] for item in report["items"]) == pytest.approx(5000)
    central = report["privacy"]["central"]
    assert central["applies"] and 0 < central["epsilon"] < 1.0
    assert central["delta"] == default_delta(5000) < 1 / 5000


@pytest.mark.parametrize("n", [0, 1, 99])
def test_empty_and_tiny_windows_say_not_enough_reports(redis_client: Any, n: int) -> None:
    config = aggregated(redis_client, n)

    document = build_window(redis_client, Registry(redis_client), config.name, WINDOW)

    (report,) = document["reports"]
    assert report["status"] == NOT_ENOUGH
    assert report["n"] == n
    assert report["items"] == []
    assert "not enough reports" in report["message"]


def test_the_minimum_is_configurable(redis_client: Any) -> None:
    config = aggregated(redis_client, 150)
    registry = Registry(redis_client)
    strict = build_window(
        redis_client, registry, config.name, WINDOW, ReportOptions(min_reports=200)
    )
    loose = build_window(redis_client, registry, config.name, WINDOW, ReportOptions(min_reports=2))
    assert strict["reports"][0]["status"] == NOT_ENOUGH
    assert loose["reports"][0]["status"] == "ok"


def test_unknown_campaigns_and_options_are_clear_errors(redis_client: Any) -> None:
    with pytest.raises(ParameterError, match="campaign"):
        build_window(redis_client, Registry(redis_client), "nope", WINDOW)
    with pytest.raises(ParameterError, match="consistency"):
        ReportOptions(consistency="magic")


def brute_force_projection(estimate: np.ndarray, n: float) -> np.ndarray:
    """Norm-Sub by its definition (Wang et al. 2020): find delta with
    sum max(estimate + delta, 0) = n by bisection."""
    low, high = -abs(estimate).sum() - n, abs(estimate).sum() + n
    for _ in range(200):
        delta = (low + high) / 2
        if np.maximum(estimate + delta, 0).sum() > n:
            high = delta
        else:
            low = delta
    return np.maximum(estimate + delta, 0)


@pytest.mark.parametrize("seed", range(5))
def test_norm_sub_is_the_shift_and_clip_that_sums_to_n(seed: int) -> None:
    estimate = np.random.default_rng(seed).normal(100, 300, size=50)
    result = norm_sub(estimate, 2000.0)
    assert (result >= 0).all()
    assert result.sum() == pytest.approx(2000.0)
    np.testing.assert_allclose(result, brute_force_projection(estimate, 2000.0), atol=1e-6)


def test_the_other_consistency_methods() -> None:
    estimate = np.array([500.0, 300.0, -50.0, 10.0])
    threshold = np.full(4, 100.0)
    assert norm_mul(estimate, 1000.0).sum() == pytest.approx(1000.0)
    assert consistent("clip", estimate, 1000, threshold).tolist() == [500, 300, 0, 10]
    assert consistent("base-cut", estimate, 1000, threshold).tolist() == [500, 300, 0, 0]
    assert consistent("none", estimate, 1000, threshold).tolist() == estimate.tolist()
    np.testing.assert_array_equal(
        consistent("projection", estimate, 1000, threshold), norm_sub(estimate, 1000)
    )


def test_the_significance_z_bounds_expected_false_flags() -> None:
    # One-sided: P(Z > z) * d = 0.05.
    from statistics import NormalDist

    for d in (2, 32, 1024):
        z = significance_z(d, 0.05)
        assert (1 - NormalDist().cdf(z)) * d == pytest.approx(0.05)


def test_the_central_guarantee_is_the_numerical_bound_with_the_closed_form_beside_it() -> None:
    result = shuffle_amplification(1.0, 100_000, 1e-6)
    assert result["applies"] and result["delta"] == 1e-6
    assert result["epsilon"] == shuffled_epsilon(1.0, 100_000, 1e-6)
    assert result["closed_form_epsilon"] == closed_form_epsilon(1.0, 100_000, 1e-6)
    assert result["closed_form_epsilon"] is not None
    assert result["epsilon"] <= result["closed_form_epsilon"] / 3


def test_the_central_guarantee_states_when_shuffling_gains_nothing() -> None:
    # eps0 = 8 among 10^4 users: ~3 clones expected; the bound gains < 1%.
    result = shuffle_amplification(8.0, 10_000)
    assert not result["applies"] and result["closed_form_epsilon"] is None
    assert result["epsilon"] == 8.0 and result["delta"] == 0.0
    assert "gains less than 1%" in result["reason"]


def test_windows_parse_from_seconds_dates_and_times() -> None:
    assert parse_window("1700006400") == WINDOW
    assert parse_window("2023-11-15") == WINDOW
    assert parse_window("2023-11-15T00:00:00Z") == WINDOW
    for bad in ("yesterday", "99999999999999999", "0001-01-01", "-5", "³", "１２"):
        with pytest.raises(ParameterError, match="window"):
            parse_window(bad)


def test_the_privacy_words_count_users_not_reports(redis_client: Any) -> None:
    config = aggregated(redis_client, 5000, reports_per_window=2)
    (report,) = build_window(redis_client, Registry(redis_client), config.name, WINDOW)["reports"]

    words = " ".join(privacy_sentences(report))
    assert report["privacy"]["central"]["n_users"] == 2500
    assert "from at least 2,500 users" in words and "2,500 reports" not in words
    assert "at most 2 reports per window" in words


def test_a_rappor_report_states_both_guarantees_of_its_actual_parameters(
    redis_client: Any,
) -> None:
    config = aggregated(redis_client, 3000, oracle="rappor", epsilon=1.1, params={"f": 0.5})
    (report,) = build_window(redis_client, Registry(redis_client), config.name, WINDOW)["reports"]
    privacy = report["privacy"]
    # Google's defaults: one report 1.0743, and 2h ln((1 - f/2) / (f/2)) = 4 ln 3 in all.
    assert privacy["permanent_epsilon"] == pytest.approx(4 * math.log(3))
    assert privacy["local_epsilon"] == pytest.approx(config.build_oracle().epsilon)
    assert privacy["rappor"]["f"] == 0.5 and privacy["rappor"]["k"] == 16
    words = " ".join(privacy_sentences(report))
    assert "RAPPOR (k=16, h=2, m=64, f=0.5, p=0.5, q=0.75)" in words
    assert f"permanent bound {4 * math.log(3):.3g} for the reports of one value" in words
    json.dumps(report)


def test_a_report_states_the_longitudinal_guarantee_per_window_and_for_life(
    redis_client: Any,
) -> None:
    config = aggregated(redis_client, 500, reports_per_window=2, lifetime_epsilon=6.0)
    (report,) = build_window(redis_client, Registry(redis_client), config.name, WINDOW)["reports"]
    longitudinal = report["privacy"]["longitudinal"]
    assert longitudinal["holds_for"] == "any two value histories"
    assert longitudinal["window_epsilon"] == pytest.approx(2 * config.epsilon)
    assert longitudinal["lifetime_epsilon"] == 6.0 and longitudinal["discloses"] == ""
    words = " ".join(privacy_sentences(report))
    assert (
        "Over a user's whole history: Against the collector and the network: an install's "
        "reports in any one window (at most 2) are together 2-differentially private (delta 0) "
        "between any two value histories."
    ) in words
    assert "at most 6 fresh randomizations) are together 6-differentially private" in words
    exact = aggregated(redis_client, 500, name="memo", memoization="exact_discloses_changes")
    (report,) = build_window(redis_client, Registry(redis_client), exact.name, WINDOW)["reports"]
    assert "the change pattern" in report["privacy"]["longitudinal"]["discloses"]
    assert "change pattern (which reports carry the same value) is disclosed" in " ".join(
        privacy_sentences(report)
    )


def test_other_oracles_have_no_permanent_bound(redis_client: Any) -> None:
    config = aggregated(redis_client, 500)
    (report,) = build_window(redis_client, Registry(redis_client), config.name, WINDOW)["reports"]
    assert "permanent_epsilon" not in report["privacy"]
    assert "permanent bound" not in " ".join(privacy_sentences(report))
