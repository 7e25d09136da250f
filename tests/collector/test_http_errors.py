"""Every answer of `ldptel collector serve` is JSON, malformed HTTP included (gunicorn's own
400/414/431/501 and werkzeug's redirects), and its logs hold neither client addresses nor
request bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from collector_api import ADMIN_TOKEN, campaign_config
from served_collector import Served, exchange, served, status_and_json

ADMIN = f"Authorization: Bearer {ADMIN_TOKEN}\r\n".encode()
GARBAGE = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03secret-garbage\r\n\r\n"


@pytest.fixture(scope="module")
def collector(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(redis_url, tmp_path_factory.mktemp("serve")) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize(
    ("request_bytes", "status", "field"),
    [
        (GARBAGE, 400, "request"),  # a TLS hello sent to the plain-HTTP port
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "path"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431, "headers"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400, "headers"),
        (b"POST /v1/campaigns HTTP/1.1\r\nHost: x\r\n" + ADMIN
         + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
         400, "body"),
        (b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: brotli\r\n\r\n",
         501, "Transfer-Encoding"),
    ],
)  # fmt: skip
def test_malformed_http_gets_a_json_error(
    collector: Served, request_bytes: bytes, status: int, field: str
) -> None:
    answer = exchange(collector.port, request_bytes)
    got_status, body = status_and_json(answer)
    assert (got_status, body["error"]["field"]) == (status, field)  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/healthz/", "//healthz", "/v1//tokens", "/v1/campaigns/x/"])
def test_no_path_is_redirected(collector: Served, path: str) -> None:
    # werkzeug answers its 308 redirects (merged or trailing slashes) with an HTML page.
    response = requests.get(f"{collector.url}{path}", timeout=5, allow_redirects=False)
    assert response.status_code in (200, 404, 405)
    assert response.headers["Content-Type"] == "application/json"
    response.json()


@pytest.mark.slow
def test_a_lone_surrogate_or_a_trailing_newline_in_a_name_is_400(collector: Served) -> None:
    api = collector.api()
    surrogate = json.dumps(campaign_config("surrogate", other_label="\ud800"))
    response = api.session.post(
        f"{collector.url}/v1/campaigns",
        data=surrogate,
        headers={**api.admin(), "Content-Type": "application/json"},
    )
    assert response.status_code == 400 and response.json()["error"]["field"] == "other_label"
    for body, path in (
        (campaign_config("name\n"), "/v1/campaigns"),
        ({"app": "app\n"}, "/v1/tokens"),
    ):
        response = api.session.post(f"{collector.url}{path}", json=body, headers=api.admin())
        assert response.status_code == 400, (path, response.text)


@pytest.mark.slow
def test_the_logs_hold_no_address_and_no_request_bytes(collector: Served) -> None:
    exchange(collector.port, GARBAGE)
    exchange(collector.port, b"GET /" + b"q" * 9000 + b" HTTP/1.1\r\n\r\n")
    requests.get(f"{collector.url}/healthz?who=probe-marker", timeout=5)
    log = collector.log()
    assert '"error":"InvalidRequestLine"' in log  # the garbage was seen and logged
    for leak in ("127.0.0.1", "secret-garbage", "qqqq", "probe-marker", "ip="):
        assert leak not in log
    for line in log.splitlines():
        if line.startswith("{"):
            json.loads(line)  # one JSON object per line
