"""GET /v1/campaigns/<name>/reports/<window>: the aggregator's stored report, read-only,
for the analyst (or admin) token, over real HTTP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.collector import create_app

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregator"))
from stream_entries import make_config, register, simulate

WINDOW = 1_700_006_400
ADMIN = "admin-token-0123456789"
ANALYST = "analyst-token-0123456789"


@pytest.fixture
def base_url(redis_client: Any, redis_url: str) -> Iterator[str]:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.zeros(500, dtype=np.int64), window=WINDOW)
    Worker(redis_client).run_pass()
    app = create_app({"redis_url": redis_url, "admin_token": ADMIN, "analyst_token": ANALYST})
    with serve(app) as url:
        yield url


def get(base_url: str, path: str, token: str | None = ADMIN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(f"{base_url}{path}", headers=headers, timeout=10)


def test_the_stored_report_is_served_for_any_form_of_the_window(base_url: str) -> None:
    for window in (str(WINDOW), "2023-11-15", "2023-11-15T13:30:00Z"):
        response = get(base_url, f"/v1/campaigns/screens/reports/{window}")
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "application/json"
        document = response.json()
        assert document["reports"][0]["n"] == 500
        assert document["window"]["start_unix"] == WINDOW


def test_errors_name_the_field(base_url: str) -> None:
    assert get(base_url, "/v1/campaigns/screens/reports/1", token=None).status_code == 401
    wrong = get(base_url, f"/v1/campaigns/screens/reports/{WINDOW}", token="x" * 20)
    assert wrong.status_code == 403
    bad = get(base_url, "/v1/campaigns/screens/reports/tomorrow")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "window"
    unknown = get(base_url, "/v1/campaigns/nope/reports/2023-11-15")
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "campaign"
    missing = get(base_url, "/v1/campaigns/screens/reports/2020-01-01")
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "window"


def test_the_analyst_token_reads_reports(base_url: str) -> None:
    assert get(base_url, f"/v1/campaigns/screens/reports/{WINDOW}", ANALYST).status_code == 200


def test_an_app_ingest_token_cannot_read_reports(base_url: str, redis_client: Any) -> None:
    from ldptel.collector.auth import create_token

    ingest = create_token(redis_client, "someapp")
    response = get(base_url, f"/v1/campaigns/screens/reports/{WINDOW}", ingest)
    assert response.status_code == 403
    assert response.json()["error"]["field"] == "Authorization"
