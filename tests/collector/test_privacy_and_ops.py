"""Privacy at the door (nothing identifying in Redis or the logs) and the operations
endpoints: /healthz, /readyz, /metrics, /openapi.yaml, 503 when Redis is down."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from collector_api import Api, batch, serve

from ldptel.store.redis_server import free_port

Campaign = tuple[str, str]
USER_AGENT = "TelemetryTestAgent/9.9 (device-serial-XYZ123)"
FORWARDED = "203.0.113.77"


@pytest.fixture
def access_log() -> Iterator[io.StringIO]:
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    logger = logging.getLogger("ldptel.collector.access")
    logger.addHandler(handler)
    yield lines
    logger.removeHandler(handler)


def redis_contents(redis_client: Any) -> bytes:
    """Every key and every value in Redis, as one byte string."""
    parts = []
    for key in redis_client.keys("*"):
        parts.append(key)
        kind = redis_client.type(key)
        if kind == b"string":
            parts.append(redis_client.get(key))
        elif kind == b"hash":
            for field, value in redis_client.hgetall(key).items():
                parts += [field, value]
        elif kind == b"set":
            parts += list(redis_client.smembers(key))
        elif kind == b"stream":
            for entry_id, fields in redis_client.xrange(key):
                parts.append(entry_id)
                for field, value in fields.items():
                    parts += [field, value]
    return b"\n".join(parts)


def test_nothing_identifying_is_stored_or_logged(
    api: Api, campaign: Campaign, redis_client: Any, access_log: io.StringIO
) -> None:
    config_id, token = campaign
    headers = {"User-Agent": USER_AGENT, "X-Forwarded-For": FORWARDED, "X-Real-IP": FORWARDED}
    response = api.post_reports(token, batch(config_id, [3, 1, 4]), headers=headers)
    assert response.status_code == 202
    stored = redis_contents(redis_client)
    for secret in (USER_AGENT, FORWARDED, "127.0.0.1", token, "device-serial"):
        assert secret.encode() not in stored, secret
    logged = access_log.getvalue()
    line = json.loads(logged.strip().splitlines()[-1])
    assert set(line) <= {"method", "path", "status", "ms", "campaign", "reports", "accepted",
                         "duplicate", "error"}  # fmt: skip
    for secret in (USER_AGENT, FORWARDED, "127.0.0.1", token, '"y"'):
        assert secret not in logged, secret


def test_stream_entries_carry_exactly_the_contract_fields(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    api.post_reports(token, batch(config_id, [0]))
    [stream] = redis_client.keys("ldptel:{colors:*}:reports")
    [(_, fields)] = redis_client.xrange(stream)
    assert sorted(fields) == [b"c", b"l", b"n", b"p", b"w"]


def test_health_readiness_and_openapi(api: Api) -> None:
    assert api.session.get(f"{api.url}/healthz").json() == {"status": "ok"}
    assert api.session.get(f"{api.url}/readyz").json() == {"status": "ready"}
    served = api.session.get(f"{api.url}/openapi.yaml")
    assert served.status_code == 200
    packaged = resources.files("ldptel.collector").joinpath("openapi.yaml").read_bytes()
    docs = (Path(__file__).parents[2] / "docs" / "openapi.yaml").read_bytes()
    assert served.content == packaged == docs


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_count_accepted_and_rejected_reports(api: Api, campaign: Campaign) -> None:
    config_id, token = campaign
    before = api.session.get(f"{api.url}/metrics").text
    api.post_reports(token, batch(config_id, [1, 2]), key="m1")
    api.post_reports(token, batch(config_id, [1, 2]), key="m1")
    api.post_reports(token, batch(config_id, [9]))
    after = api.session.get(f"{api.url}/metrics").text
    for name, delta in [
        ("ldptel_collector_reports_accepted_total", 2),
        ("ldptel_collector_duplicate_batches_total", 1),
        ("ldptel_collector_reports_rejected_total", 1),
        ("ldptel_collector_batch_size_count", 1),
    ]:
        assert metric(after, name) - metric(before, name) == delta, name
    assert 'ldptel_collector_requests_rejected_total{reason="invalid_report"}' in after
    assert "ldptel_collector_request_seconds_bucket" in after


def test_redis_down_gives_503_with_retry_after_never_2xx() -> None:
    server = serve({"redis_url": f"redis://127.0.0.1:{free_port()}/0", "retry_after_seconds": 2})
    try:
        api = Api(server.url)
        assert api.session.get(f"{api.url}/healthz").status_code == 200
        for response in [
            api.session.get(f"{api.url}/readyz"),
            api.post_reports("ldp_" + "A" * 43, batch("0" * 16, [1])),
            api.session.get(f"{api.url}/v1/campaigns/colors"),
            api.session.post(f"{api.url}/v1/tokens", json={"app": "a"}, headers=api.admin()),
        ]:
            assert response.status_code == 503
            assert response.headers["Retry-After"] == "2"
            assert response.json()["error"]["field"] == "redis"
        metrics = api.session.get(f"{api.url}/metrics").text
        assert metric(metrics, "ldptel_collector_redis_errors_total") >= 4
    finally:
        server.stop()
