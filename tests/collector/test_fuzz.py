"""Fuzz every operation of docs/openapi.yaml (schemathesis) against a real collector on a
real Redis: whatever the input, the answer is never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from collector_api import ADMIN_TOKEN, Api, ServerThread, campaign_config, serve
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

SCHEMA = schemathesis.openapi.from_path(Path(__file__).parents[2] / "docs" / "openapi.yaml")
ADMIN_PATHS = (
    "/v1/campaigns",
    "/v1/campaigns/{name}/retire",
    "/v1/campaigns/{name}/reports/{window}",
    "/v1/tokens",
)


@pytest.fixture(scope="module")
def fuzz_target(redis_url: str) -> Iterator[tuple[ServerThread, str]]:
    """A collector with one campaign ('colors', so some generated names hit it) and a token."""
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    server = serve({"redis_url": redis_url})
    api = Api(server.url)
    api.create_campaign(campaign_config())
    yield server, api.create_token()
    server.stop()
    redis.Redis.from_url(redis_url).flushdb()


@pytest.mark.slow
@SCHEMA.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_input_gives_a_server_error(case: Any, fuzz_target: tuple[ServerThread, str]) -> None:
    server, token = fuzz_target
    secret = ADMIN_TOKEN if case.operation.path in ADMIN_PATHS else token
    headers = {"Authorization": f"Bearer {secret}"}
    if case.operation.path == "/v1/reports" and not (case.headers or {}).get("Idempotency-Key"):
        headers["Idempotency-Key"] = "fuzz"
    case.call_and_validate(base_url=server.url, headers=headers, checks=[not_a_server_error])
