"""A "pem" open-domain campaign end to end over real HTTP: the SDK reports free text (a
group drawn with the CSPRNG, the sketch report of the value's prefix), the collector
validates it (JSON 4xx naming the field), the aggregator counts every group's sketch in
the window state, and the window report discovers the heavy hitters with no candidate list,
stating the release threshold and the expected false discoveries."""

from __future__ import annotations

from typing import Any

import pytest
from live_collector import stored_reports

from ldptel.aggregator.html import render_html
from ldptel.aggregator.reports import Candidates, ReportOptions, build_window, list_windows
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.status import ReportStatus
from ldptel.store.registry import Registry

#: Two PEM groups (9 and 16 bits of the 2-byte values), CMS of 256 x 64 cells each.
PEM = {
    "name": "answers",
    "oracle": "pem",
    "epsilon": 4.0,
    "max_length": 2,
    "params": {"top_k": 2, "step_bits": 8, "sketch": "cms", "k": 256, "m": 64},
    "reports_per_window": 2000,
    "lifetime_epsilon": 1e6,
}


def test_frequent_strings_are_discovered_and_one_user_strings_never_listed(
    collector: Any, redis_client: Any, open_reporter: Any
) -> None:
    collector.api.create_campaign(PEM)
    config = CampaignConfig.from_dict(PEM).as_created()
    assert config.params["sketch"] == "cms" and config.build_mechanism().groups == 2
    reporter = open_reporter(strict=False)
    singles = [chr(0x100 + i) for i in range(300)]  # two UTF-8 bytes each, all distinct
    values = ["ab"] * 500 + ["cd"] * 400 + singles
    assert all(reporter.report("answers", value) is ReportStatus.SPOOLED for value in values)
    assert reporter.report("answers", "abc") is ReportStatus.INVALID_VALUE  # > max_length
    assert reporter.flush(timeout=60)
    stored = stored_reports(redis_client, config)
    assert len(stored) == len(values) and set(stored[0]) == {"group", "j", "bits"}

    assert Worker(redis_client).run_pass().reports == len(values)
    assert Worker(redis_client).run_pass().reports == 0  # exactly once
    (window,) = list_windows(redis_client, Registry(redis_client), "answers")
    # false_flags 1e-3: a one-user string is listed with probability at most about 1e-3 (the
    # stated expected false discoveries), the test's false-failure rate.
    options = ReportOptions(false_flags=1e-3)
    document = build_window(redis_client, Registry(redis_client), "answers", window, options)
    (report,) = document["reports"]
    assert report["oracle"] == "pem" and report["n"] == len(values)
    assert [item["item"] for item in report["items"]] == ["ab", "cd"]
    discovery = report["discovery"]
    assert discovery["source"] == "pem" and discovery["discovered"] == 2
    assert discovery["expected_false_discoveries"] <= 1e-3 and discovery["threshold"] > 0
    for item in report["items"]:  # estimates among all n, within 5 stderr of the truth
        truth = values.count(item["item"])
        assert abs(item["estimate"] - truth) < 5 * item["stderr"]
        assert item["threshold"] == discovery["threshold"] < item["estimate"]
    table, page = format_window(document), render_html(document)
    for text in (table, page):
        assert "2 of " in text and "release threshold" in text and "costs no privacy" in text
        assert "ab" in text and "cd" in text and singles[0] not in text
    with pytest.raises(ParameterError, match="without candidates"):  # never silently ignored
        build_window(redis_client, Registry(redis_client), "answers", window, options,
                     candidates=Candidates(("ab",), "a file"))  # fmt: skip


def test_a_bad_pem_report_is_refused_with_json_naming_the_field(collector: Any, token: str) -> None:
    config_id = collector.api.create_campaign(PEM)
    for report, field in [
        ({"j": 0, "bits": "AAAAAAAAAAA="}, "reports[0].group"),
        ({"group": 2, "j": 0, "bits": "AAAAAAAAAAA="}, "reports[0].group"),
        ({"group": 0, "j": 256, "bits": "AAAAAAAAAAA="}, "reports[0].j"),
    ]:
        body = {"campaign": "answers", "config_id": config_id, "reports": [report]}
        response = collector.api.post_reports(token, body)
        assert response.status_code == 400, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        assert field in response.text


def test_pem_is_an_open_domain_oracle_only() -> None:
    categorical = {"name": "colors", "oracle": "pem", "epsilon": 1.0, "domain": ["a", "b"]}
    for data, field in [
        (categorical, "oracle"),
        ({**PEM, "max_length": 2000}, "max_length"),  # PEM's own bound (1024 bytes)
        ({**PEM, "params": {"top_k": 0}}, "top_k"),
        ({**PEM, "params": {"rows": 4}}, "params"),
    ]:
        with pytest.raises(ParameterError) as error:
            CampaignConfig.from_dict(data)
        assert error.value.field == field


def test_the_sketchs_probabilities_are_served_and_a_weaker_one_refused() -> None:
    config = CampaignConfig.from_dict(PEM).as_created()
    served = CampaignConfig.from_dict(config.to_dict(), stored=True).build_mechanism()
    assert {"p", "q"} <= set(config.params)
    assert served.derived_params() == {"p": config.params["p"], "q": config.params["q"]}
    tampered = {**PEM, "params": {**config.params, "p": 0.99}}
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict(tampered)
    assert "p" in str(error.value) and "above the config's 4.0" in str(error.value)
