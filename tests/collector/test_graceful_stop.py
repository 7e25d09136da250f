"""SIGTERM stops `ldptel collector serve` gracefully: a request the server is already reading
is finished and answered, and every batch is either acknowledged (2xx) and stored, or not
stored at all.

What the collector's gevent worker (collector/worker.py) guarantees on SIGTERM (and what this
tests): it stops accepting, lets each connection it holds finish and answer its request within
`graceful_timeout` (30 s), then closes it; an idle keep-alive connection stays open for at
most 1 s more. Connections it never accepted (still in the listen backlog, or opened after the
stop) are refused or reset without being read, so nothing of them is stored; the client
retries them with the same Idempotency-Key against the next collector.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from collector_api import DOMAIN, wait_until_up
from served_collector import app_loaded, private_tmpdir, unread_by_server
from waiting import scaled, wait_for

from ldptel.client.campaign import CampaignConfig
from ldptel.collector.auth import create_token
from ldptel.store import keys
from ldptel.store.redis_server import free_port
from ldptel.store.registry import Registry

SENDERS = 4


def request_head(port: int, token: str, key: str, length: int) -> bytes:
    return (
        f"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer {token}\r\n"
        f"Idempotency-Key: {key}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """Status and headers of one HTTP/1.1 response (its body is read and dropped)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed within a response")
        body += chunk
    return int(lines[0].split()[1]), headers


def body_of(config_id: str, values: list[int]) -> bytes:
    reports = [{"y": v} for v in values]
    return json.dumps({"campaign": "colors", "config_id": config_id, "reports": reports}).encode()


class Sender(threading.Thread):
    """Sends small batches over one keep-alive connection (reconnecting when it is closed)
    until the server is gone; records each key's outcome: an HTTP status or 'error'."""

    def __init__(self, port: int, token: str, config_id: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.port, self.token, self.config_id, self.stop = port, token, config_id, stop
        self.outcomes: dict[str, int | str] = {}
        #: When the server answered "Connection: close" (as a stopping worker does).
        self.closed_at: list[float] = []

    def run(self) -> None:
        sock: socket.socket | None = None
        deadline = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < deadline:
            key = uuid.uuid4().hex
            body = body_of(self.config_id, [len(self.outcomes) % 5])
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=40)
                sock.sendall(request_head(self.port, self.token, key, len(body)) + body)
                status, headers = read_response(sock)
                self.outcomes[key] = status
                if headers.get("connection", "").lower() == "close":
                    self.closed_at.append(time.monotonic())
                    sock.close()
                    sock = None
            except OSError:  # refused, reset, or closed: the server is stopping or gone
                self.outcomes[key] = "error"
                if sock is not None:
                    sock.close()
                sock = None
                time.sleep(0.01)
        if sock is not None:
            sock.close()


def workers_loaded(master: int, workers: int, tmpdir: Path) -> bool:
    """Whether the gunicorn master has `workers` children and each has loaded the app."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return len(children) == workers and all(app_loaded(tmpdir, int(pid)) for pid in children)


@pytest.mark.slow
def test_sigterm_finishes_requests_in_flight_and_stores_exactly_the_acknowledged(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    config = CampaignConfig.from_dict(
        {"name": "colors", "oracle": "de", "epsilon": 1.0, "domain": DOMAIN}
    )
    config_id, _ = Registry(redis_client).create(config)
    token = create_token(redis_client, "myapp")
    port = free_port()
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": "stop-admin-token-1234567",
           **private_tmpdir(tmp_path)}  # fmt: skip
    # The logs go to a file: an undrained pipe would fill up and block the workers.
    log = (tmp_path / "collector.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
         "--redis-url", redis_url, "--workers", "2", "--rate-limit", "0",
         "--body-timeout", "60"],  # the big batch waits past SIGTERM: not for its body's 10 s
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    stop = threading.Event()
    senders = [Sender(port, token, config_id, stop) for _ in range(SENDERS)]
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        # Both workers, not only the first to answer: one still booting at SIGTERM fails.
        loaded = lambda: workers_loaded(process.pid, 2, tmp_path / "tmp")  # noqa: E731
        wait_for(loaded, "both workers loaded the app")
        for sender in senders:
            sender.start()
        # A large batch whose body is only half sent when SIGTERM arrives: the server is
        # reading it, so it is in flight.
        big_key, big_values = "big-batch", [i % 5 for i in range(3000)]
        big_body = body_of(config_id, big_values)
        big = socket.create_connection(("127.0.0.1", port), timeout=40)
        big.sendall(request_head(port, token, big_key, len(big_body)) + big_body[:1000])
        wait_for(  # a worker accepted it, read what was sent, and blocks reading the rest
            lambda: unread_by_server(port, big) == 0, "the server read the first 1000 bytes"
        )
        wait_for(
            lambda: sum(s.outcomes.get(k) == 202 for s in senders for k in s.outcomes) >= 20,
            "20 small batches were acknowledged",
        )
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        wait_for(  # a worker answers "Connection: close" once it has begun to stop
            lambda: any(t > signalled for s in senders for t in s.closed_at),
            "a worker is stopping",
        )
        big.sendall(big_body[1000:])
        big_status, _ = read_response(big)
        big.close()
        process.wait(timeout=scaled(60))
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
        for sender in senders:
            sender.join(timeout=60)
    logs = (tmp_path / "collector.log").read_text()
    assert process.returncode == 0, logs
    assert big_status == 202, logs

    outcomes = {key: status for s in senders for key, status in s.outcomes.items()}
    outcomes[big_key] = big_status
    acknowledged = {key for key, status in outcomes.items() if status == 202}
    assert set(outcomes.values()) <= {202, "error"}, outcomes
    assert "error" in outcomes.values()  # requests after the stop did not get through
    stored = {
        name.decode().rsplit(":", 1)[1]
        for name in redis_client.scan_iter(match=keys.idempotency("colors", 0, "*"))
    }
    # Each batch is either acknowledged and stored, or neither: no stored batch lost its
    # answer, no acknowledged batch is missing.
    assert stored == acknowledged
    entries = redis_client.xrange(keys.stream("colors", 0))
    assert len(entries) == len(acknowledged)
    assert sum(int(fields[b"n"]) for _, fields in entries) == len(acknowledged) - 1 + 3000
