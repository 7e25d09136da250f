"""`ldptel demo --scenario daily`: a year of daily windows under memoization "tree" through the
real collector and aggregator, then the dashboard's trend with its confidence band; and the
command itself, end to end (small n: the guarantee's cost, not the demo's default, is what
the numbers show)."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import Any

import numpy as np

from ldptel.cli.demo_daily import DAYS, daily_campaign, daily_values, fill_daily


def test_daily_values_change_at_most_once_and_the_yes_share_rises() -> None:
    values = daily_values(20_000, np.random.default_rng(1))
    changes = np.count_nonzero(np.diff(values, axis=1), axis=1)
    assert changes.max() == 1
    assert values[:, 0].mean() < 0.33 < 0.5 < values[:, -1].mean()


def test_a_year_of_daily_windows_reaches_the_dashboard_as_a_trend_with_bands(
    redis_url: str, redis_client: Any
) -> None:
    from ldptel.dashboard import create_app

    args = argparse.Namespace(n=400, seed=5)
    with ExitStack() as stack:
        filled = fill_daily(redis_url, args, daily_campaign(4.0), stack, show=False)
    report = filled.document["reports"][0]
    assert report["tree"]["window_index"] == DAYS - 1 and report["n"] == 400
    assert sum(filled.true_counts) == 400
    answer = create_app(redis_client).test_client().get("/campaigns/demo-daily/trend.json")
    assert answer.status_code == 200, answer.text
    rows = [row for row in json.loads(answer.text)["rows"] if row["item"] == "yes"]
    assert len(rows) == DAYS
    assert all(r["ci_low"] < r["estimate"] < r["ci_high"] for r in rows)
    page = create_app(redis_client).test_client().get("/campaigns/demo-daily")
    assert page.status_code == 200 and "memoization tree" in page.text


def test_the_daily_scenario_refuses_sdk_users_in_one_line() -> None:
    from ldptel_command import ldptel, one_line_error

    result = ldptel("demo", "--scenario", "daily", "--sdk-users", "5")
    one_line_error(result, "demo", "sdk_users")
