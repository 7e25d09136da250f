"""An open-domain OLH campaign end to end over real HTTP: the SDK reports free text as OLH's
report of its item key (a seed from the CSPRNG, a bucket through g-ary randomized response),
the collector validates it (JSON 4xx naming the field), the aggregator logs the reports
exactly once, and the window report lists the frequent candidates, never a one-user string,
and states its exact release threshold."""

from __future__ import annotations

import csv
import io
from typing import Any

from live_collector import stored_reports

from ldptel.aggregator.csv_export import render_csv
from ldptel.aggregator.html import render_html
from ldptel.aggregator.model import from_json, to_json
from ldptel.aggregator.reports import Candidates, ReportOptions, build_window, list_windows
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.status import ReportStatus
from ldptel.store.registry import Registry

OPEN_OLH = {
    "name": "answers",
    "oracle": "olh",
    "epsilon": 4.0,
    "max_length": 24,
    "reports_per_window": 2000,
    "lifetime_epsilon": 1e6,
}


def test_frequent_strings_are_found_and_one_user_strings_never_listed(
    collector: Any, redis_client: Any, open_reporter: Any
) -> None:
    collector.api.create_campaign(OPEN_OLH)
    config = CampaignConfig.from_dict(OPEN_OLH).as_created()
    g = config.params["g"]
    assert g == 56
    reporter = open_reporter(strict=False)
    singles = [f"only me {i}" for i in range(300)]
    values = ["tea"] * 400 + ["coffee"] * 250 + singles
    assert all(reporter.report("answers", value) is ReportStatus.SPOOLED for value in values)
    assert reporter.report("answers", "x" * 25) is ReportStatus.INVALID_VALUE  # > max_length
    assert reporter.flush(timeout=60)
    stored = stored_reports(redis_client, config)
    assert len(stored) == len(values) and set(stored[0]) == {"seed", "y"}
    assert all(0 <= report["y"] < g for report in stored)

    assert Worker(redis_client).run_pass().reports == len(values)
    assert Worker(redis_client).run_pass().reports == 0  # exactly once
    (window,) = list_windows(redis_client, Registry(redis_client), "answers")
    # false_flags 1e-3: a one-user string is listed with probability at most 1e-3 / 303
    # each (the exact binomial threshold), 1e-3 over all: the test's false-failure rate.
    options = ReportOptions(false_flags=1e-3)
    candidates = Candidates(("tea", "coffee", "cocoa", *singles), "a file")
    document = build_window(
        redis_client, Registry(redis_client), "answers", window, options, None, candidates
    )
    (report,) = document["reports"]
    assert report["oracle"] == "olh" and report["n"] == len(values)
    assert [item["item"] for item in report["items"]] == ["tea", "coffee"]
    discovery = report["discovery"]
    assert (discovery["candidates"], discovery["discovered"]) == (303, 2)
    assert discovery["expected_false_discoveries"] == 1e-3 and discovery["threshold"] > 0
    for item in report["items"]:
        truth = values.count(item["item"])
        assert abs(item["estimate"] - truth) < 5 * item["stderr"]
        assert item["threshold"] == discovery["threshold"] < item["estimate"]
    table, page = format_window(document), render_html(document)
    for text in (table, page):
        assert "2 of 303 candidates (a file) discovered" in text
        assert "release threshold" in text and "costs no privacy" in text
        assert "tea" in text and "coffee" in text and singles[0] not in text
    assert from_json(to_json(document)) == document  # the JSON the CLI and the API serve
    rows = list(csv.DictReader(io.StringIO(render_csv(document))))
    assert [row["item"] for row in rows] == ["tea", "coffee"]


def test_a_bad_olh_report_is_refused_with_json_naming_the_field(collector: Any, token: str) -> None:
    config_id = collector.api.create_campaign(OPEN_OLH)
    for report, field in [
        ({"y": 0}, "reports[0].seed"),
        ({"seed": 2**32, "y": 0}, "reports[0].seed"),
        ({"seed": 1, "y": 56}, "reports[0].y"),
        ({"seed": 1, "y": True}, "reports[0].y"),
    ]:
        body = {"campaign": "answers", "config_id": config_id, "reports": [report]}
        response = collector.api.post_reports(token, body)
        assert response.status_code == 400, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        assert field in response.text
