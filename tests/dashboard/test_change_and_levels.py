"""The change statistics against repetitions of the real oracle and estimator, and campaigns
with privacy levels (the combined report and each level's own, across windows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import requests
from dashboard_site import desktop
from scipy.stats import chi2, poisson

from ldptel.aggregator.reports import OK, ReportOptions
from ldptel.aggregator.reports.statistics import item_statistics
from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.client.campaign import CampaignConfig
from ldptel.dashboard import create_app
from ldptel.dashboard.change import change
from ldptel.dashboard.series import Numbers
from ldptel.store import codec, keys
from ldptel.store.registry import Registry

DAY = 86_400
WINDOW = 1_700_006_400 - 1_700_006_400 % DAY


def window_numbers(oracle: Any, values: np.ndarray, rng: np.random.Generator) -> Numbers:
    """One window's columns as the aggregator computes them from perturbed reports."""
    n = len(values)
    columns = item_statistics(
        oracle, oracle.support(oracle.perturb_batch(values, rng)), n, ReportOptions()
    )
    d = oracle.domain_size
    items = tuple(f"item{i}" for i in range(d))
    return Numbers(
        window=0, level="", config_id="c", oracle="de", epsilon=1.0, memoization="none",
        status=OK, message="", n=n, confidence=0.95, consistency="norm-sub", false_flags=0.05,
        items=items, estimate=columns["estimate"], variance=columns["variance"],
        ci_low=columns["ci_low"], ci_high=columns["ci_high"], consistent=columns["consistent"],
        significant=columns["significant"], kind="categorical", bounds=None,
        privacy=(), positions={item: i for i, item in enumerate(items)},
    )  # fmt: skip


def test_the_change_stderr_matches_repetitions_and_false_flags_stay_rare() -> None:
    # Two windows of the same 2,000 users (no change), 200 times, through DE's real
    # perturbation and the aggregator's estimator and exact variance.
    config = CampaignConfig.from_dict(
        {"name": "same", "oracle": "de", "epsilon": 1.0, "domain": [f"item{i}" for i in range(8)]}
    )
    oracle = config.build_oracle()
    values = np.repeat(np.arange(8), [800, 400, 300, 200, 150, 100, 50, 0])
    rng = np.random.default_rng(18)
    repetitions = 200
    z = np.empty((repetitions, 8))
    flags = 0
    for r in range(repetitions):
        found = change(window_numbers(oracle, values, rng), window_numbers(oracle, values, rng))
        z[r] = found.z
        flags += found.flagged
    # Var(z) = 1 per item if the stated stderr is right: (R - 1) s^2 ~ chi2(R - 1); the
    # two-sided 99.9% interval per item (false-failure rate <= 8 x 0.1%). A stderr missing
    # one window's variance would give Var(z) = 2, far outside.
    low, high = chi2.ppf([0.0005, 0.9995], repetitions - 1) / (repetitions - 1)
    variances = z.var(axis=0, ddof=1)
    assert np.all((variances > low) & (variances < high)), variances
    # Fewer than 0.05 false flags per comparison are expected: over 200, at most 10 on
    # average; the 99.9% Poisson quantile of 10 bounds the count.
    assert flags <= poisson.ppf(0.999, 0.05 * repetitions)


LEVELS = {"high": 0.5, "low": 2.0}


def post_levels(client: Any, config: CampaignConfig, window: int, rng: np.random.Generator) -> None:
    """4,000 users per level in `window`, as the collector stores their batches."""
    values = rng.choice(8, size=4000, p=[0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.0])
    for level in LEVELS:
        oracle = config.level_oracle(level)
        assert oracle is not None
        for start in range(0, 4000, 500):
            batch = oracle.perturb_batch(values[start : start + 500], rng)
            entry = codec.StreamEntry(config.config_id, window, 500, oracle.pack(batch), level)
            client.xadd(keys.stream(config.name, 0), codec.encode(entry))


def test_levels_show_combined_and_each_level_across_windows(redis_client: Any) -> None:
    # As stored (as_created): its reports are stamped with the created config's id.
    config = CampaignConfig.from_dict(
        {"name": "leveled", "oracle": "de", "epsilon": 2.0, "levels": LEVELS,
         "domain": [f"item{i}" for i in range(8)]}
    ).as_created()  # fmt: skip
    Registry(redis_client).create(config)
    rng = np.random.default_rng(5)
    for day in range(3):
        post_levels(redis_client, config, WINDOW + day * DAY, rng)
    Worker(redis_client).run_pass()
    with serve(create_app(redis_client)) as base:
        page = requests.get(f"{base}/campaigns/leveled", timeout=30).text
        assert '<option value="" selected>combined over levels</option>' in page
        assert '<option value="high">level high</option>' in page
        assert "high 0.5, low 2" in requests.get(f"{base}/", timeout=30).text
        for level in ("", "high", "low"):
            trend = requests.get(
                f"{base}/campaigns/leveled/trend.json",
                params={"level": level, "items": "item0"},
                timeout=30,
            ).json()
            assert [row["level"] for row in trend["rows"]] == [level] * 3
            for row in trend["rows"]:
                stored = json_report(redis_client, row["window"], level)
                assert row["n"] == stored["n"] and row["estimate"] == stored["items"][0]["estimate"]
        # The combined report has all users; each level half of them.
        assert trend["rows"][0]["n"] == 4000
        page = requests.get(f"{base}/campaigns/leveled", params={"level": "low"}, timeout=30).text
        assert (
            desktop(page).count('<circle class="point"') == 3 * 3
        )  # three default items, 3 windows

        # More reports arrive for the last window and the aggregator rebuilds its report: the
        # dashboard reads the rebuilt document (its version changed), not its cached copy.
        post_levels(redis_client, config, WINDOW + 2 * DAY, rng)
        Worker(redis_client).run_pass()
        trend = requests.get(
            f"{base}/campaigns/leveled/trend.json", params={"items": "item0"}, timeout=30
        ).json()
        assert [row["n"] for row in trend["rows"]] == [8000, 8000, 16000]


def json_report(client: Any, window: int, level: str) -> Any:
    from ldptel.aggregator.reports import load_window

    document = load_window(client, "leveled", window)
    assert document is not None
    return next(r for r in document["reports"] if r["level"] == level)


def test_a_campaign_without_reports_yet_says_so(redis_client: Any) -> None:
    config = CampaignConfig.from_dict(
        {"name": "fresh", "oracle": "de", "epsilon": 1.0, "domain": ["a", "b"]}
    )
    Registry(redis_client).create(config)
    with serve(create_app(redis_client)) as base:
        assert "no report yet" in requests.get(f"{base}/", timeout=30).text
        page = requests.get(f"{base}/campaigns/fresh", timeout=30)
        assert page.status_code == 200 and "No stored report for this view yet." in page.text
        assert "Fewer than two stored windows: nothing to compare yet." in page.text
        missing = requests.get(f"{base}/campaigns/fresh/change.json", timeout=30)
        assert missing.status_code == 400 and missing.json()["error"]["field"] == "from"
