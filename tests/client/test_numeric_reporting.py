"""Numeric campaigns in the SDK and end to end: `report(campaign, 3.7)` clips into the range
and never raises; memoized alpha-point rounding (Ding et al. 2017) resends a level's report
and stays unbiased over installs; and the whole pipeline (SDK -> collector over real HTTP ->
Redis -> aggregator pass -> report) gives a mean whose interval covers the true mean."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from live_collector import LiveCollector, stored_reports

from ldptel.aggregator.reports import build_window
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.client import ReportStatus, configs, guarantee
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.transport import ConfigAnswer
from ldptel.store.registry import Registry


def numeric_campaign(collector: LiveCollector, name: str, **changes: Any) -> CampaignConfig:
    data = {"name": name, "oracle": "duchi", "epsilon": 1.0, "range": [0, 2000], **changes}
    config_id = collector.api.create_campaign(data)
    config = CampaignConfig.from_dict(data).as_created()
    assert config.config_id == config_id
    return config


def test_report_takes_numbers_clips_them_and_refuses_other_values(
    collector: LiveCollector, open_reporter: Any, redis_client: Any
) -> None:
    config = numeric_campaign(collector, "latency", reports_per_window=10, lifetime_epsilon=100.0)
    reporter = open_reporter(strict=False)

    for value in (3.7, 0, -5.0, 10**400, math.inf, np.float32(12.5)):
        assert reporter.report("latency", value) is ReportStatus.SPOOLED, value
    for value in ("3.7", True, None, math.nan):
        assert reporter.report("latency", value) is ReportStatus.INVALID_VALUE, value
    assert reporter.flush(timeout=10)

    reports = stored_reports(redis_client, config)
    assert len(reports) == 6 and all(set(r) == {"y"} for r in reports)
    assert reporter.stats()["not_spooled"] == {"invalid_value": 4}


MEMOIZED_NUMBERS = {
    "name": "battery", "oracle": "1bitmean", "epsilon": 1.0, "range": [0, 100],
    "params": {"resolution": 4}, "memoization": "exact_discloses_changes",
}  # fmt: skip


def test_exact_memoization_of_numbers_is_refused_at_creation_and_by_the_sdk(
    tmp_path: Path,
) -> None:
    # Its secret rounding point puts nearby values on one level: which reports repeat
    # discloses how close two values are (the exact loss is unbounded; tests below).
    with pytest.raises(ParameterError) as refused:
        CampaignConfig.from_dict(MEMOIZED_NUMBERS)
    assert refused.value.field == "memoization" and "refused" in refused.value.reason
    # A config stored before: the aggregator still reads it; a client will not report.
    stored = CampaignConfig.from_dict(MEMOIZED_NUMBERS, stored=True)
    answer = ConfigAnswer(200, {**stored.to_dict(), "config_id": stored.config_id})
    with pytest.raises(LdptelError) as client_side:
        configs.parse_answer(answer)
    assert client_side.value.field == "memoization"
    # Nor one an older SDK cached: loading the cache gives nothing, so the client fetches.
    configs.store(tmp_path, "battery", configs.Known("active", stored, 0.0))
    assert (tmp_path / "configs" / "battery.json").exists()
    assert configs.load(tmp_path, "battery") is None
    promise = guarantee.guarantee(stored)
    assert promise.holds_for == "one report at a time only"
    assert "no guarantee over a user's history" in promise.statement


@pytest.mark.slow
def test_numbers_reported_through_the_sdk_give_a_mean_whose_interval_covers_the_truth(
    collector: LiveCollector, open_reporter: Any, redis_client: Any
) -> None:
    n = 1500
    config = numeric_campaign(
        collector, "latency", oracle="hm", reports_per_window=n, lifetime_epsilon=1e6
    )
    values = np.random.default_rng(4).lognormal(math.log(150.0), 1.0, n)
    reporter = open_reporter(batch_size=500)
    for value in values.tolist():
        reporter.report("latency", value)
    assert reporter.flush(timeout=30)
    Worker(redis_client).run_pass()

    window = config.window_of(collector_clock(redis_client))
    document = build_window(redis_client, Registry(redis_client), "latency", window)
    (report,) = document["reports"]
    assert report["n"] == n and report["oracle"] == "hm"
    mean = report["numeric"]["mean"]
    truth = float(np.clip(values, 0, 2000).mean())
    # The reports are randomized by the OS CSPRNG, so the test's outcome is random: it
    # asserts |estimate - truth| < 5 stderrs, which fails for a correct pipeline with
    # probability < 1e-6 (normal approximation at n = 1500), and that the 95% interval is
    # estimate +/- 1.96 stderrs; the interval's 95% rate is checked over 200 windows in
    # tests/aggregator/test_numeric_report.py.
    assert abs(mean["estimate"] - truth) < 5 * mean["stderr"], (mean, truth)
    z = NormalDist().inv_cdf(0.975)
    assert mean["ci_high"] - mean["ci_low"] == pytest.approx(2 * z * mean["stderr"])
    assert "mean" in format_window(document)


def collector_clock(redis_client: Any) -> float:
    """The Redis server's time, which the collector's windows follow (same machine)."""
    seconds, micros = redis_client.time()
    return seconds + micros / 1e6
