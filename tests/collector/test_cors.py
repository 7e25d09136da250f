"""CORS for browser clients (collector/cors.py): an allowed origin's preflight is answered
with the methods and headers the SDK sends, its answers name it and expose Date, ETag and
Retry-After, and no answer ever allows credentials; another origin gets no CORS header."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from collector_api import Api, batch, serve
from openapi_conformance import conforms

from ldptel.collector.settings import CollectorConfig

APP = "https://app.example"


@pytest.fixture
def cors_api(redis_url: str, redis_client: Any) -> Iterator[Api]:
    server = serve({"redis_url": redis_url, "cors_origins": f"{APP}, https://other.example/"})
    client = Api(server.url)
    client.session.hooks["response"].append(conforms)
    yield client
    server.stop()


def preflight(api: Api, path: str, origin: str) -> Any:
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    return api.session.options(f"{api.url}{path}", headers=headers)


@pytest.mark.parametrize("path", ["/v1/reports", "/v1/campaigns/colors"])
def test_an_allowed_origin_gets_its_preflight_answered(cors_api: Api, path: str) -> None:
    response = preflight(cors_api, path, APP)
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == APP
    assert response.headers["Access-Control-Allow-Methods"] == "GET, POST"
    named = response.headers["Access-Control-Allow-Headers"].split(",")
    allowed = {h.strip().lower() for h in named}
    assert allowed >= {"authorization", "content-type", "content-encoding", "idempotency-key"}
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_another_origin_gets_no_cors_header(cors_api: Api) -> None:
    response = preflight(cors_api, "/v1/reports", "https://evil.example")
    assert response.status_code == 204
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    answer = cors_api.session.get(
        f"{cors_api.url}/v1/campaigns/colors", headers={"Origin": "https://evil.example"}
    )
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert "Origin" in answer.headers["Vary"]


def test_answers_to_an_allowed_origin_name_it_and_expose_the_clock(cors_api: Api) -> None:
    config_id, token = cors_api.create_campaign(), cors_api.create_token()
    origin = {"Origin": "https://other.example"}
    config = cors_api.session.get(f"{cors_api.url}/v1/campaigns/colors", headers=origin)
    assert config.status_code == 200
    assert config.headers["Access-Control-Allow-Origin"] == "https://other.example"
    exposed = {h.strip() for h in config.headers["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"Date", "ETag", "Retry-After"}
    stored = cors_api.post_reports(token, batch(config_id, [0, 1]), headers=origin)
    assert stored.status_code == 202
    assert stored.headers["Access-Control-Allow-Origin"] == "https://other.example"
    assert "Access-Control-Allow-Credentials" not in stored.headers
    # The admin API is not shared with pages.
    admin = cors_api.session.post(
        f"{cors_api.url}/v1/tokens", json={"app": "x"}, headers={**cors_api.admin(), **origin}
    )
    assert "Access-Control-Allow-Origin" not in admin.headers


def test_without_origins_a_preflight_gets_no_cors_header(api: Api) -> None:
    response = preflight(api, "/v1/reports", APP)
    assert response.status_code == 204
    assert "Access-Control-Allow-Origin" not in response.headers


def test_the_setting_comes_from_the_environment() -> None:
    config = CollectorConfig.from_environ({"LDPTEL_CORS_ORIGINS": "*"})
    assert config.cors_origins == "*"
