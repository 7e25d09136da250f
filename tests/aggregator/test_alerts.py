"""Alerts on estimates (aggregator/alerts.py): the gauges hold a real aggregation's numbers,
and under the null hypothesis the tests alarm at the stated rate (simulated through the real
oracle and the report's own statistics; tolerances from the binomial)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from scipy.stats import binom
from stream_entries import make_config, register, simulate
from waiting import wait_for

from ldptel.aggregator.alerts import AlertSettings, Estimate, estimates, evaluate, holm
from ldptel.aggregator.metrics import AggregatorMetrics, HealthServer
from ldptel.aggregator.model import from_json
from ldptel.aggregator.reports import ReportOptions
from ldptel.aggregator.reports.statistics import item_statistics
from ldptel.aggregator.worker import Worker
from ldptel.analysis.simulation import simulate_support
from ldptel.cli.main import main
from ldptel.client.errors import ParameterError
from ldptel.store import reports

DAY = 86_400
#: A tail probability so small that a correct test fails this often at most (per bound).
TAIL = 1e-6


def scrape(metrics: AggregatorMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, labels) -> value, read from the served /metrics."""
    with HealthServer(metrics, "127.0.0.1", 0) as server:
        text = requests.get(server.address + "/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def expected_holm(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as its definition reads: reject H_(1..k-1) for the first k (in
    ascending p) with p_(k) > alpha / (m - k + 1)."""
    ranked = sorted(p_values)
    m = len(ranked)
    cut = next((k for k, p in enumerate(ranked) if p > alpha / (m - k)), m)
    return [p in ranked[:cut] for p in p_values]


def run_worker(client: Any, metrics: AggregatorMetrics) -> None:
    """`aggregator run --every`'s loop until its first pass ended, then stopped."""
    worker = Worker(client, metrics=metrics)
    thread = threading.Thread(target=worker.run_forever, args=(0.05,))
    thread.start()
    try:
        wait_for(lambda: metrics.last_success._value.get() != 0, "the first pass ended")
    finally:
        worker.stop()
        thread.join(timeout=30)


def test_the_gauges_hold_the_tests_of_the_last_two_complete_windows(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    rng = np.random.default_rng(3)
    simulate(redis_client, config, rng.integers(0, 8, 4000), window=DAY)
    # The next day item0 is held by 30% more of the users: a change the test must find.
    shifted = np.where(rng.random(4000) < 0.3, 0, rng.integers(0, 8, 4000))
    simulate(redis_client, config, shifted, window=2 * DAY, seed=1)
    now = config.window_of(time.time())
    simulate(redis_client, config, np.zeros(500, dtype=np.int64), window=now, seed=2)
    settings = AlertSettings.parse("0.01", "screens:item0=0.2,screens:item1=0.5")
    metrics = AggregatorMetrics(stale_seconds=60, alerts=settings)
    run_worker(redis_client, metrics)
    samples = scrape(metrics)

    def gauge(name: str, item: str | None = None) -> float | None:
        labels = {"campaign": "screens"} if item is None else {"campaign": "screens", "item": item}
        return samples.get((name, tuple(sorted(labels.items()))))

    # The window being filled (today's) is not tested: the last complete one is.
    assert gauge("ldptel_alert_window_start_seconds") == 2 * DAY
    assert gauge("ldptel_alert_previous_window_start_seconds") == DAY
    assert samples[("ldptel_alert_alpha", ())] == 0.01
    [before, after] = [
        from_json(reports.load(redis_client, "screens", w) or b"")["reports"][0]
        for w in (DAY, 2 * DAY)
    ]
    p_values = []
    for old, new in zip(before["items"], after["items"], strict=True):
        item = new["item"]
        share, stderr = new["estimate"] / after["n"], new["stderr"] / after["n"]
        assert gauge("ldptel_estimate", item) == pytest.approx(share, rel=1e-12)
        assert gauge("ldptel_estimate_stderr", item) == pytest.approx(stderr, rel=1e-12)
        old_share, old_stderr = old["estimate"] / before["n"], old["stderr"] / before["n"]
        z = (share - old_share) / math.hypot(stderr, old_stderr)
        assert gauge("ldptel_estimate_change_z", item) == pytest.approx(z, rel=1e-9)
        p_values.append(math.erfc(abs(z) / math.sqrt(2)))
    flags = expected_holm(p_values, 0.01)
    for item, flag in zip(after["items"], flags, strict=True):
        assert gauge("ldptel_estimate_change_significant", item["item"]) == float(flag)
    assert flags[0] and gauge("ldptel_estimate_change_z", "item0") > 3  # item0 rose
    # item0 (about 0.39) is far above 0.2; item1 (about 0.09) is not above 0.5.
    assert gauge("ldptel_estimate_threshold", "item0") == 0.2
    assert gauge("ldptel_estimate_threshold_exceeded", "item0") == 1.0
    assert gauge("ldptel_estimate_threshold_exceeded", "item1") == 0.0
    assert gauge("ldptel_estimate_threshold", "item2") is None  # no threshold, no series


def test_the_alerts_command_prints_what_the_gauges_hold(redis_client: Any, redis_url: str,
                                                        capsys: Any) -> None:  # fmt: skip
    import json

    config = make_config(range=[0, 100], oracle="duchi")
    register(redis_client, config)
    assert main(["aggregator", "alerts", "--redis-url", redis_url]) == 0
    assert capsys.readouterr().out == "no campaign has a complete window with a report yet\n"
    assert main(["aggregator", "alerts", "--redis-url", redis_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"alpha": 0.01, "campaigns": []}
    rng = np.random.default_rng(5)
    simulate(redis_client, config, rng.uniform(0, 40, 2000), window=DAY)
    simulate(redis_client, config, rng.uniform(0, 40, 2000), window=2 * DAY, seed=1)
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    capsys.readouterr()
    command = ["aggregator", "alerts", "--redis-url", redis_url, "--json"]
    assert main([*command, "--alert-thresholds", "screens:mean=90"]) == 0
    [campaign] = json.loads(capsys.readouterr().out)["campaigns"]
    assert (campaign["window_unix"], campaign["previous_unix"]) == (2 * DAY, DAY)
    [mean] = campaign["items"]
    assert mean["item"] == "mean" and 10 < mean["estimate"] < 30
    assert (mean["threshold"], mean["exceeded"]) == (90.0, False)
    assert main(command[:-1]) == 0
    assert capsys.readouterr().out.startswith("screens  window 1970-01-03T00:00:00Z: 1 items, ")


GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_every_kind_of_report_gives_its_main_reports_estimates(path: Path) -> None:
    document = from_json(path.read_bytes())
    [main] = [r for r in document["reports"] if r["level"] == ""]  # levels: the combined one
    found = estimates(document)
    if "numeric" in main:
        mean = main["numeric"]["mean"]
        assert found == {"mean": Estimate(mean["estimate"], mean["stderr"])}
    else:
        n = main["n"]
        assert found == {i["item"]: Estimate(i["estimate"] / n, i["stderr"] / n)
                         for i in main["items"]}  # fmt: skip
    # A report whose stderr is not calibrated is not tested, nor one with too few reports.
    assert estimates({**document, "reports": [{**main, "uncalibrated": "LASSO"}]}) == {}
    assert estimates({**document, "reports": [{**main, "status": "not_enough_reports"}]}) == {}


@pytest.mark.parametrize(
    ("alpha", "thresholds", "field"),
    [
        ("0", "", "alert_alpha"),
        ("x", "", "alert_alpha"),
        ("0.01", "screens=1", "alert_thresholds"),
        ("0.01", "screens:item0=high", "alert_thresholds"),
    ],
)
def test_bad_alert_settings_name_their_field(alpha: str, thresholds: str, field: str) -> None:
    with pytest.raises(ParameterError) as raised:
        AlertSettings.parse(alpha, thresholds)
    assert raised.value.field == field


def test_holm_is_its_definition() -> None:
    rng = np.random.default_rng(0)
    for _ in range(2000):
        p_values = list(rng.random(int(rng.integers(1, 9))) ** 3)
        assert holm(p_values, 0.05) == expected_holm(p_values, 0.05)


# -- the false-alarm rate under the null --------------------------------------------------------
TRIALS = 3000
ALPHA = 0.05
N = 2000


@pytest.fixture(scope="module")
def null_windows() -> list[dict[str, Estimate]]:
    """2 * TRIALS windows of N reports from one distribution (DE, d = 4, epsilon 1), each as
    its report states it: the oracle's estimate and stderr (item_statistics) per item."""
    config = make_config(domain=["a", "b", "c", "d"])
    oracle = config.build_oracle()
    counts = np.array([800, 600, 400, 200])
    rng = np.random.default_rng(11)
    windows = []
    for _ in range(2 * TRIALS):
        columns = item_statistics(oracle, simulate_support(oracle, counts, rng), N, ReportOptions())
        windows.append({
            item: Estimate(columns["estimate"][i] / N, columns["stderr"][i] / N)
            for i, item in enumerate("abcd")
        })  # fmt: skip
    return windows


def alarms(windows: list[dict[str, Estimate]], settings: AlertSettings,
           items: str = "abcd") -> int:  # fmt: skip
    """Window pairs in which any of `items` alarmed (changed or above its threshold)."""
    fired = 0
    for old, new in zip(windows[::2], windows[1::2], strict=True):
        current = {i: new[i] for i in items}
        tested = evaluate("c", current, {i: old[i] for i in items}, settings)
        fired += any(a.changed or a.exceeded for a in tested)
    return fired


@pytest.mark.slow
def test_one_items_change_test_alarms_at_alpha_under_the_null(
    null_windows: list[dict[str, Estimate]],
) -> None:
    fired = alarms(null_windows, AlertSettings(ALPHA), items="a")
    low, high = binom.ppf(TAIL, TRIALS, ALPHA), binom.isf(TAIL, TRIALS, ALPHA)
    assert low <= fired <= high, fired  # 3000 pairs at 0.05: about 150, within [97, 210]


@pytest.mark.slow
def test_a_campaigns_change_tests_alarm_at_most_at_alpha_under_the_null(
    null_windows: list[dict[str, Estimate]],
) -> None:
    # Holm over the 4 items: the chance of any false alarm is at most alpha.
    fired = alarms(null_windows, AlertSettings(ALPHA))
    assert fired <= binom.isf(TAIL, TRIALS, ALPHA), fired
    assert fired >= binom.ppf(TAIL, TRIALS, ALPHA / 4), fired  # >= Bonferroni's alpha / m alone


@pytest.mark.slow
def test_a_threshold_at_the_true_share_alarms_at_alpha(
    null_windows: list[dict[str, Estimate]],
) -> None:
    # a's true share is 800 / 2000 = 0.4: "significantly above 0.4" is false every time.
    settings = AlertSettings(ALPHA, {("c", "a"): 0.4})
    fired = sum(evaluate("c", {"a": w["a"]}, {}, settings)[0].exceeded for w in null_windows)
    trials = len(null_windows)
    assert binom.ppf(TAIL, trials, ALPHA) <= fired <= binom.isf(TAIL, trials, ALPHA), fired
