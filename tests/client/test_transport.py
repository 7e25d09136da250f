"""The SDK's HTTP calls (client/transport.py, client/deadline.py), against a real collector
and small servers on 127.0.0.1 that misbehave: every call ends by its total deadline however
slowly the answer trickles in (over HTTP, HTTPS and through an HTTP proxy); a redirect is
followed only within the collector's origin (the token goes nowhere else) and only if it
keeps a POST a POST; a refused token and an answer that is not the collector's are told
apart from the collector's own refusals."""

from __future__ import annotations

import ssl
import subprocess
import time
from pathlib import Path

import pytest
from live_collector import SLACK_SECONDS, SilentServer, TrickleServer
from waiting import wait_for

from ldptel.client import CollectorUrlError, RedirectNotFollowedError, TokenRefusedError
from ldptel.client.transport import MAX_REDIRECTS, Transport, origin

REPORT = '{"y":1}'


def post(transport: Transport, config_id: str = "0123456789abcdef") -> object:
    return transport.post_batch("colors", config_id, "key-1", [REPORT])


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A server context with a self-signed certificate for 127.0.0.1, and that certificate
    (made by the openssl command line)."""
    directory = tmp_path_factory.mktemp("tls")
    key, cert = directory / "key.pem", directory / "cert.pem"
    command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
    command += f" -addext subjectAltName=IP:127.0.0.1 -keyout {key} -out {cert}"
    subprocess.run(command.split(), check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


@pytest.mark.parametrize("scheme", ["http", "https", "http proxy"])
@pytest.mark.parametrize("head_at_once", [0, len(TrickleServer.ANSWER) - 4096])
@pytest.mark.parametrize("call", ["config", "post"])
def test_a_trickling_answer_is_cut_at_the_total_deadline(
    scheme, head_at_once, call, tls, monkeypatch
):
    context, cert = tls
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # requests trusts it (trust_env)
    # A byte every 0.5 s: a read timeout of 1 s (per read) would never trip.
    server = TrickleServer(
        head_at_once=head_at_once, interval=0.5, tls=context if scheme == "https" else None
    )
    url = server.url
    if scheme == "http proxy":  # the trickling server is the app's HTTP proxy
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", server.url)
        url = "http://collector.invalid"
    try:
        transport = Transport(url, "t", timeout=1.0)
        started = time.monotonic()
        if call == "config":
            answer = transport.fetch_config("colors", None)
            status, reason = answer.status, answer.reason
        else:
            outcome = transport.post_batch("colors", "0123456789abcdef", "k", [REPORT])
            assert outcome.verdict == "retry"
            status, reason = outcome.status, outcome.reason
        took = time.monotonic() - started
        assert status is None and reason == "network: no complete answer within the 1 s timeout"
        assert took < 1.0 + SLACK_SECONDS
        wait_for(lambda: server.closed, "the server saw the connection closed, not left open")
        assert server.closed[0] < 1.0 + SLACK_SECONDS
    finally:
        server.close()


def test_a_same_origin_redirect_is_followed_within_the_deadline(collector, token):
    config = collector.campaign()
    collector.faults.location = "/v1/campaigns/colors"  # relative: the same origin
    collector.faults.config_plan = ["308"]
    transport = Transport(collector.url, token, timeout=5.0)
    answer = transport.fetch_config("colors", None)
    assert answer.status == 200 and answer.body is not None
    assert answer.body["config_id"] == config.config_id
    collector.faults.location = f"{collector.url}/v1/reports"
    collector.faults.plan = ["307"]
    outcome = post(transport, config.config_id)
    assert outcome.verdict == "delivered"
    first, second = collector.faults.posted()
    assert first.body == second.body  # re-posted: the same body under the same key
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == "key-1"


@pytest.mark.parametrize(
    "where",
    [
        "another port",  # a server of someone else on this host
        "https",  # http -> https on the same host and port: another origin
        "//evil.example/v1/reports",  # scheme-relative
        "http://127.0.0.1:{port}@evil.example/v1/reports",  # user info that looks like home
        "http://localhost:{port}/v1/reports",  # another spelling of the host: another origin
    ],
)
@pytest.mark.parametrize("status", ["307", "308"])
def test_a_redirect_to_another_origin_is_not_followed(where, status, collector, token):
    thief = SilentServer()
    try:
        collector.faults.location = {
            "another port": f"{thief.url}/v1/reports",
            "https": f"https://127.0.0.1:{collector.port}/v1/reports",
        }.get(where, where.format(port=collector.port))
        collector.faults.plan = [status]
        collector.faults.config_plan = [status]
        transport = Transport(collector.url, token, timeout=5.0)
        outcome = post(transport)
        assert outcome.verdict == "retry"  # the batch is kept
        answer = transport.fetch_config("colors", None)
        for problem in (outcome.problem, answer.problem):
            assert isinstance(problem, RedirectNotFollowedError)
            assert problem.field == "collector_url" and problem.status == int(status)
            assert f"HTTP {status} to another origin" in problem.reason
            assert token not in str(problem)
        assert [(s.method, s.path) for s in collector.faults.seen[-2:]] == [
            ("POST", "/v1/reports"),
            ("GET", "/v1/campaigns/colors"),
        ]  # one request each: not followed
        assert thief.heads == []  # nothing, and no token, went there
    finally:
        thief.close()


def test_a_redirect_that_would_turn_the_post_into_a_get_is_not_followed(collector, token):
    collector.faults.location = f"{collector.url}/v1/reports"
    for status in ("301", "302", "303"):
        collector.faults.plan = [status]
        outcome = post(Transport(collector.url, token, timeout=5.0))
        assert outcome.verdict == "retry"
        assert isinstance(outcome.problem, RedirectNotFollowedError)
        assert "would turn the POST into a GET" in outcome.reason


def test_a_redirect_loop_ends_after_max_redirects(collector, token):
    collector.faults.location = f"{collector.url}/v1/reports"
    collector.faults.always = "307"
    outcome = post(Transport(collector.url, token, timeout=5.0))
    assert outcome.verdict == "retry" and isinstance(outcome.problem, RedirectNotFollowedError)
    assert f"more than {MAX_REDIRECTS} redirects" in outcome.reason
    assert len(collector.faults.posted()) == MAX_REDIRECTS + 1


@pytest.mark.parametrize("status", ["401", "403"])
def test_a_refused_token_is_its_own_verdict_and_names_the_token(status, collector, token):
    collector.faults.plan = [status]
    outcome = post(Transport(collector.url, token, timeout=5.0))
    assert outcome.verdict == "token"
    problem = outcome.problem
    assert isinstance(problem, TokenRefusedError) and problem.field == "token"
    assert problem.status == int(status) and "refused the ingest token" in problem.reason
    assert token not in str(problem)


def test_the_collector_refuses_an_unknown_token_with_a_token_verdict(collector, token):
    wrong = "wrong-" + token
    outcome = post(Transport(collector.url, wrong, timeout=5.0))
    assert outcome.verdict == "token" and outcome.status == 403
    assert "unknown ingest token" in outcome.reason and wrong not in str(outcome.problem)


def test_an_answer_that_is_not_the_collectors_keeps_the_batch(collector, token):
    collector.faults.plan = ["404html"]  # a web server's page, not the collector
    outcome = post(Transport(collector.url, token, timeout=5.0))
    assert outcome.verdict == "retry" and isinstance(outcome.problem, CollectorUrlError)
    # The collector's own "no such path" (collector_url with a wrong path): the URL is wrong.
    outcome = post(Transport(f"{collector.url}/wrong-prefix", token, timeout=5.0))
    assert outcome.verdict == "retry" and outcome.status == 404
    assert isinstance(outcome.problem, CollectorUrlError)
    # The collector's own refusal of the reports is final.
    collector.faults.plan = ["400"]
    assert post(Transport(collector.url, token, timeout=5.0)).verdict == "reject"


def test_a_revalidated_config_is_not_a_problem(collector, token):
    config = collector.campaign()
    answer = Transport(collector.url, token, timeout=5.0).fetch_config("colors", config.config_id)
    assert answer.status == 304 and answer.problem is None


def test_a_non_collector_answer_to_a_post_is_never_final(collector, token):
    for status in (
        "300html",
        "404html",
        "405html",
    ):  # a 3xx that is no redirect, a web server's 404
        collector.faults.plan = [status]
        outcome = post(Transport(collector.url, token, timeout=5.0))
        assert outcome.verdict == "retry" and isinstance(outcome.problem, CollectorUrlError)


def test_origins():
    assert origin("http://Example.COM/x") == ("http", "example.com", 80)
    assert origin("https://example.com:443/") == origin("https://example.com")
    assert origin("http://example.com:443/") != origin("https://example.com/")
    assert origin("http://u:p@example.com/") is None
    assert origin("ftp://example.com/") is None
    assert origin("http://example.com:99999/") is None
