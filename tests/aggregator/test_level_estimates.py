"""Privacy levels in the aggregator: a window state per level, the combined estimate with its
inverse-variance weights and exact variance, the baselines estimated with the epsilon each
level actually used, and reports that show the levels."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
import pytest
from scipy import stats
from stream_entries import make_config, register

from ldptel.aggregator.csv_export import render_csv
from ldptel.aggregator.html import render_html
from ldptel.aggregator.reports import (
    NOT_ENOUGH,
    build_window,
    load_window,
    privacy_sentences,
    significance_z,
)
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import FrequencyOracle
from ldptel.store import keys
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400
DAY = 86_400
LEVELS = {"high": 0.5, "medium": 1.0, "low": 2.0}
FREQUENCIES = np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0])


def leveled(**changes: Any) -> CampaignConfig:
    return make_config("leveled", epsilon=2.0, levels=LEVELS, **changes)


def append_level(
    client: Any,
    config: CampaignConfig,
    level: str,
    values: np.ndarray,
    rng: np.random.Generator,
    window: int = WINDOW,
    oracle_level: str | None = None,
) -> None:
    """Perturb `values` as a client at `level` does and append them in batches of 100 (with
    `oracle_level`, perturb as that other level instead: a misbehaving client)."""
    oracle = level_oracle(config, oracle_level or level)
    for start in range(0, len(values), 100):
        batch = oracle.perturb_batch(values[start : start + 100], rng)
        fields = {
            "c": config.config_id,
            "w": window,
            "n": len(values[start : start + 100]),
            "p": oracle.pack(batch),
            "l": level,
        }
        client.xadd(keys.stream(config.name, 0), fields)


def level_oracle(config: CampaignConfig, level: str) -> FrequencyOracle:
    oracle = config.level_oracle(level)
    assert oracle is not None
    return oracle


def values_of(n: int) -> np.ndarray:
    """n users holding the items in exactly the proportions FREQUENCIES (n a multiple of 10)."""
    return np.repeat(np.arange(FREQUENCIES.size), np.round(FREQUENCIES * n).astype(int))


def run(client: Any, config: CampaignConfig, users: dict[str, int], seed: int = 0) -> Any:
    register(client, config)
    rng = np.random.default_rng(seed)
    for level, n in users.items():
        append_level(client, config, level, values_of(n), rng)
    Worker(client).run_pass()
    document = load_window(client, config.name, WINDOW)
    assert document is not None
    json.dumps(document, allow_nan=False)
    return document


def test_each_level_has_its_own_state_and_report_after_the_combined_one(
    redis_client: Any,
) -> None:
    config = leveled()
    users = {"high": 3000, "medium": 2000, "low": 500}

    document = run(redis_client, config, users)

    for level, n in users.items():
        state = StateKey(WINDOW, config.config_id, level)
        assert read_state(redis_client, config.name, [0], state, 8)[0] == n
    combined, *per_level = document["reports"]
    assert "combined" in combined and combined["level"] == ""
    assert combined["n"] == sum(users.values()) and combined["status"] == "ok"
    assert [r["level"] for r in per_level] == ["high", "medium", "low"]
    assert [r["epsilon"] for r in per_level] == pytest.approx([0.5, 1.0, 2.0])
    assert [r["n"] for r in per_level] == [3000, 2000, 500]
    rows = combined["combined"]["levels"]
    assert [(r["level"], r["epsilon"], r["n"]) for r in rows] == [
        ("high", 0.5, 3000), ("medium", 1.0, 2000), ("low", 2.0, 500),
    ]  # fmt: skip
    assert combined["combined"]["strategy"] == "optimal"
    assert "share one distribution" in combined["combined"]["assumption"]


def test_the_combined_estimate_is_the_inverse_variance_weighted_one_with_its_variance(
    redis_client: Any,
) -> None:
    config = leveled()
    users = {"high": 3000, "medium": 2000, "low": 500}

    combined, *per_level = run(redis_client, config, users)["reports"]

    oracles = {r["level"]: level_oracle(config, r["level"]) for r in per_level}
    ns = {r["level"]: r["n"] for r in per_level}
    # Precision of each level's estimated frequency at f_v = 0: n_l^2 / Var(c^_l).
    precision = {
        level: ns[level] ** 2 / oracle.variance(ns[level], None)
        for level, oracle in oracles.items()
    }
    total = sum(precision.values())
    weights = {level: p / total for level, p in precision.items()}
    for row in combined["combined"]["levels"]:
        assert row["weight"] == pytest.approx(float(np.mean(weights[row["level"]])))
    assert sum(row["weight"] for row in combined["combined"]["levels"]) == pytest.approx(1.0)
    n = combined["n"]
    level_estimates = {r["level"]: np.array([i["estimate"] for i in r["items"]]) for r in per_level}
    expected = n * sum(weights[level] * level_estimates[level] / ns[level] for level in ns)
    estimate = np.array([i["estimate"] for i in combined["items"]])
    np.testing.assert_allclose(estimate, expected, rtol=1e-12)
    f = np.clip(estimate / n, 0, 1)
    variance = n**2 * sum(
        weights[level] ** 2 * oracle.variance(ns[level], f) / ns[level] ** 2
        for level, oracle in oracles.items()
    )
    np.testing.assert_allclose([i["variance"] for i in combined["items"]], variance, rtol=1e-12)
    # Significance uses the f_v = 0 variance of the combination, n^2 / sum of precisions.
    z = significance_z(8, 0.05)
    np.testing.assert_allclose(
        [i["threshold"] for i in combined["items"]], z * np.sqrt(n**2 / total), rtol=1e-12
    )
    # At f_v = 0 the combination beats every level alone, scaled to all n users.
    alone = [(r["items"][0]["threshold"] * n / r["n"]) ** 2 for r in per_level]
    assert combined["items"][0]["threshold"] ** 2 < min(alone)


def test_a_level_with_almost_no_information_gets_almost_no_weight(redis_client: Any) -> None:
    config = make_config("leveled", epsilon=2.0, levels={"paranoid": 0.01, "open": 2.0})

    combined = run(redis_client, config, {"paranoid": 1000, "open": 1000})["reports"][0]

    weights = {row["level"]: row["weight"] for row in combined["combined"]["levels"]}
    assert weights["paranoid"] < 1e-3 and weights["open"] > 0.999


def test_entries_at_a_level_the_config_does_not_define_are_quarantined(
    redis_client: Any,
) -> None:
    config = leveled()
    register(redis_client, config)
    oracle = level_oracle(config, "low")
    good = oracle.pack(oracle.perturb_batch(np.zeros(10, dtype=np.int64), np.random.default_rng()))
    stream = keys.stream(config.name, 0)
    for level in ("extreme", ""):
        redis_client.xadd(
            stream, {"c": config.config_id, "w": WINDOW, "n": 10, "p": good, "l": level}
        )
    append_level(redis_client, config, "low", values_of(100), np.random.default_rng(1))

    stats = Worker(redis_client).run_pass()

    assert (stats.quarantined, stats.reports) == (2, 100)
    reasons = [f[b"reason"] for _, f in redis_client.xrange(keys.quarantine(config.name, 0))]
    assert all(b"privacy level" in reason for reason in reasons)


def test_minimum_estimates_every_level_at_the_smallest_epsilon(redis_client: Any) -> None:
    config = leveled(level_strategy="minimum")

    combined, *per_level = run(redis_client, config, {"high": 1000, "low": 3000})["reports"]

    assert [r["epsilon"] for r in per_level] == pytest.approx([0.5, 0.5])
    rows = {row["level"]: row for row in combined["combined"]["levels"]}
    assert rows["low"]["epsilon_used"] == pytest.approx(0.5)
    # One oracle for all: the weights are the levels' shares of the reports (plain pooling).
    assert (rows["high"]["weight"], rows["low"]["weight"]) == pytest.approx((0.25, 0.75))
    assert rows["medium"]["n"] == 0 and rows["medium"]["weight"] == 0
    assert "smallest epsilon" in " ".join(privacy_sentences(combined))


def test_threshold_estimates_the_reporting_levels_at_t(redis_client: Any) -> None:
    config = leveled(level_strategy="threshold", level_threshold=1.0)
    register(redis_client, config)
    rng = np.random.default_rng(2)
    append_level(redis_client, config, "medium", values_of(2000), rng)
    append_level(redis_client, config, "low", values_of(1000), rng)
    # A client that ignored the rule: its level does not report, so its entries are set aside.
    append_level(redis_client, config, "high", values_of(100), rng, oracle_level="low")

    stats = Worker(redis_client).run_pass()
    combined, *per_level = build_window(redis_client, Registry(redis_client), config.name, WINDOW)[
        "reports"
    ]

    assert stats.quarantined == 1
    assert combined["n"] == 3000 and combined["epsilon"] == pytest.approx(1.0)
    assert [(r["level"], r["epsilon"]) for r in per_level] == [("medium", 1.0), ("low", 1.0)]
    high = combined["combined"]["levels"][0]
    assert (high["level"], high["epsilon_used"], high["n"], high["weight"]) == ("high", None, 0, 0)
    assert "did not report" in " ".join(privacy_sentences(combined))


def test_an_empty_window_of_a_leveled_campaign_says_not_enough_reports(
    redis_client: Any,
) -> None:
    config = leveled()
    register(redis_client, config)

    document = build_window(redis_client, Registry(redis_client), config.name, WINDOW)

    (combined,) = document["reports"]
    assert combined["status"] == NOT_ENOUGH and combined["n"] == 0
    assert all(row["weight"] == 0 for row in combined["combined"]["levels"])
    assert "not enough reports" in format_window(document)


def test_html_table_and_csv_show_the_levels(redis_client: Any) -> None:
    document = run(redis_client, leveled(), {"high": 3000, "medium": 2000, "low": 500})

    page = render_html(document)
    text = format_window(document)
    rows = list(csv.DictReader(io.StringIO(render_csv(document))))

    domain = len(document["reports"][0]["items"])
    assert [(row["level"], row["combined"]) for row in rows[::domain]] == [
        ("", "true"), *((level, "false") for level in LEVELS)
    ]  # fmt: skip
    assert len(rows) == domain * (1 + len(LEVELS))

    assert page.count('data-combined="true"') == 1
    for level in LEVELS:
        assert f'<tr data-level="{level}">' in page
        assert f"level {level}" in text
    assert 'class="weight"' in page and "combined over privacy levels (optimal)" in page
    assert "combined over privacy levels (optimal)" in text
    assert "epsilon used" in text and "weight" in text


def test_combined_estimates_fall_in_their_confidence_intervals_at_the_expected_rate(
    redis_client: Any,
) -> None:
    """20 windows x 8 items of the combined estimate against the true counts: the z-scores
    (error / reported stderr) have mean square ~ 1 (chi-square bounds) and none beyond the
    Bonferroni limit."""
    config = leveled()
    register(redis_client, config)
    users = {"high": 3000, "medium": 2000, "low": 500}
    rng = np.random.default_rng(7)
    windows = [WINDOW + i * DAY for i in range(20)]
    for window in windows:
        for level, n in users.items():
            append_level(redis_client, config, level, values_of(n), rng, window=window)
    Worker(redis_client).run_pass()

    truth = FREQUENCIES * sum(users.values())
    z = []
    for window in windows:
        document = load_window(redis_client, config.name, window)
        assert document is not None
        combined = document["reports"][0]
        items = combined["items"]
        z += [(i["estimate"] - t) / i["stderr"] for i, t in zip(items, truth, strict=True)]
    scores = np.array(z)
    k = scores.size
    assert np.max(np.abs(scores)) < stats.norm.isf(1e-4 / (2 * k))
    low, high = stats.chi2.ppf([1e-4, 1 - 1e-4], k) / k
    assert low < np.mean(scores**2) < high
