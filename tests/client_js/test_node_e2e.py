"""The TypeScript client in Node against a real collector and aggregator: 150 installs
(each its own stateDir: identity, ledger, spool), each reporting once, give a window report
counting 150 whose estimates are the oracle's unbiased ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collector_api import DOMAIN, campaign_config
from js_harness import Collector, run_node

from ldptel.aggregator.report import ReportOptions, build_window, list_windows
from ldptel.aggregator.worker import Worker
from ldptel.store.registry import Registry

INSTALLS = 150


def test_150_node_installs_each_reporting_once_give_a_window_report_of_150(
    client_js: Path, collector: Collector, redis_client: Any, tmp_path: Path
) -> None:
    collector.api.create_campaign(campaign_config())  # DE over DOMAIN, epsilon 1
    token = collector.api.create_token()
    values = [DOMAIN[i % len(DOMAIN)] for i in range(INSTALLS)]
    out = run_node(
        client_js / "e2e" / "installs.mjs", collector.url, token, "colors", str(tmp_path), *values
    )
    results = json.loads(out)
    assert len(results) == INSTALLS
    bad = [r for r in results if r["status"] != "spooled" or not r["flushed"]]
    assert bad == [], bad[:3]
    assert sum(r["delivered"] for r in results) == INSTALLS
    assert not [r for r in results if r["errors"]]

    assert Worker(redis_client).run_pass().reports == INSTALLS
    (window,) = list_windows(redis_client, Registry(redis_client), "colors")
    document = build_window(
        redis_client, Registry(redis_client), "colors", window, ReportOptions(), None, None
    )
    (report,) = document["reports"]
    assert report["n"] == INSTALLS
    # Each label was held by 30 installs: every estimate within 5 standard errors of it.
    for item in report["items"]:
        assert abs(item["estimate"] - INSTALLS / len(DOMAIN)) < 5 * item["stderr"], item
