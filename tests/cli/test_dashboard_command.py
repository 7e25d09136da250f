"""`ldptel dashboard` as a user runs it: gunicorn on the collector's gevent worker, on
loopback until SIGTERM; it refuses to bind beyond loopback without the analyst token, holds
a thousand idle connections while pages are served, closes an idle one after the keep-alive
timeout, and answers an oversized request line or header with JSON."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import requests
from ldptel_command import ldptel, one_line_error
from served_collector import connect, read_until_closed
from waiting import scaled, wait_for

from ldptel.store.redis_server import free_port


@contextmanager
def served_dashboard(
    redis_url: str, tmp_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """`ldptel dashboard` on a free loopback port until the block ends (SIGTERM)."""
    port = free_port()
    log_path = tmp_path / f"dashboard-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ldptel.cli", "dashboard", "--port", str(port),
             "--redis-url", redis_url],
            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert process.poll() is None, log_path.read_text()
        return f"dashboard on {url}/" in log_path.read_text()

    try:
        wait_for(up, "the dashboard came up")
        yield url, port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=scaled(60)) == 0, log_path.read_text()
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def still_open(sock: socket.socket) -> bool:
    """Open and silent: the server has neither answered nor closed it."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # b"": closed; bytes: answered
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def test_beyond_loopback_it_needs_the_analyst_token(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LDPTEL_ANALYST_TOKEN", raising=False)
    done = ldptel("dashboard", "--host", "0.0.0.0", "--redis-url", redis_url)
    one_line_error(done, "dashboard", "host")


@pytest.mark.parametrize("weak", ["a", "analyst", "0123456789" * 3])
def test_a_weak_analyst_token_refuses_to_start_naming_its_variable(
    redis_url: str, weak: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = "LDPTEL_ANALYST_TOKEN"
    monkeypatch.setenv(variable, weak)
    one_line_error(ldptel("dashboard", "--redis-url", redis_url), "dashboard", variable)
    monkeypatch.delenv(variable)
    (tmp_path / "analyst_token").write_text(weak + "\n")
    monkeypatch.setenv(f"{variable}_FILE", str(tmp_path / "analyst_token"))
    one_line_error(ldptel("dashboard", "--redis-url", redis_url), "dashboard", variable)


def test_it_serves_until_sigterm(redis_client: object, redis_url: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "dashboard", "--port", "0", "--redis-url", redis_url],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        while "dashboard on" not in line and line:  # gunicorn's own JSON lines come first
            line = process.stderr.readline()
        url = re.search(r"http://\S+/", line)  # port 0: the one gunicorn bound
        assert url, line
        page = requests.get(url.group(0), timeout=30)
        assert page.status_code == 200 and "No campaigns yet." in page.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_it_holds_a_thousand_idle_connections_while_pages_are_served(
    redis_client: object, redis_url: str, tmp_path: Path
) -> None:
    # A keep-alive longer than the test's work: on a loaded machine, pages could take
    # longer than the default 5 s, after which the server rightly closes idle connections.
    env = {"GUNICORN_CMD_ARGS": "--keep-alive 60"}
    with served_dashboard(redis_url, tmp_path, env) as (url, port), ExitStack() as held:
        idle = [held.enter_context(connect(port)) for _ in range(1000)]
        for sock in idle[::2]:  # half of them slow clients, stopped within their headers
            sock.sendall(b"GET / HTTP/1.1\r\nHost: dashboard\r\n")
        with requests.Session() as session:
            for path in ("/", "/assets/dashboard.css", "/campaigns/nope", "/"):
                answer = session.get(f"{url}{path}", timeout=30)
                assert answer.status_code in (200, 404), (path, answer.status_code)
        assert sum(still_open(sock) for sock in idle) == 1000


def test_an_idle_connection_is_closed_after_the_keep_alive(
    redis_client: object, redis_url: str, tmp_path: Path
) -> None:
    with served_dashboard(redis_url, tmp_path) as (_, port), connect(port) as idle:
        opened = time.monotonic()
        assert read_until_closed(idle, opened + 30) == b""  # closed, not answered
        assert time.monotonic() - opened >= 4.5  # gunicorn's keepalive, as the collector's


def test_an_oversized_request_line_or_header_is_a_json_error(
    redis_client: object, redis_url: str, tmp_path: Path
) -> None:
    with served_dashboard(redis_url, tmp_path) as (url, _):
        long_query = requests.get(f"{url}/", params={"q": "x" * 10_000}, timeout=30)
        big_header = requests.get(f"{url}/", headers={"X-Big": "x" * 10_000}, timeout=30)
    for answer, status, field in [(long_query, 414, "path"), (big_header, 431, "headers")]:
        assert answer.status_code == status
        assert answer.headers["Content-Type"] == "application/json"
        assert answer.json()["error"]["field"] == field
