"""`ldptel aggregator run` and `ldptel report` against a Redis Cluster URL, end to end: batches
posted over HTTP to a collector on the cluster come back as a window report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from collector_api import Api, ServerThread, batch, campaign_config, collector_app
from ldptel_command import ldptel, one_line_error

pytestmark = pytest.mark.slow


def test_report_reads_what_the_collector_stored_on_the_cluster(
    redis_cluster_url: str, cluster_client: Any
) -> None:
    server = ServerThread(collector_app({"redis_url": redis_cluster_url}))
    try:
        api = Api(server.url)
        config_id = api.create_campaign(campaign_config(shards=4))
        token = api.create_token()
        for i in range(30):
            values = [(i + j) % 5 for j in range(10)]
            assert api.post_reports(token, batch(config_id, values)).status_code == 202
    finally:
        server.stop()

    run = ldptel("aggregator", "run", "--once", "--quiet", "--redis-url", redis_cluster_url)
    assert run.returncode == 0, run.stderr
    assert "aggregated 300 reports (30 entries, 0 quarantined) from 4 shards" in run.stdout
    report = ldptel("report", "colors", "--json", "--redis-url", redis_cluster_url)
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    [window] = document["reports"]
    assert window["config_id"] == config_id and window["n"] == 300


def test_a_bad_cluster_url_is_a_one_line_error() -> None:
    result = ldptel("report", "colors", "--redis-url", "redis+cluster://127.0.0.1:7000/2")
    one_line_error(result, "report", "redis_url")
