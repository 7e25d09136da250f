"""Slow and idle connections cost `ldptel collector serve` a greenlet each, not a thread: with
256 of them open, normal clients are all served; a body that stalls or trickles is answered
408 and dropped at `body_timeout_seconds`, an idle connection at the keep-alive timeout.
(The throughput ratio is measured in benchmarks/collector_slow_clients.py.)"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import requests
from collector_api import batch
from served_collector import connect, read_until_closed, served, status_and_json
from waiting import scaled

from ldptel.store import keys

SLOW = 256
KEEPALIVE = 5  # gunicorn's keepalive under `ldptel collector serve`
#: Past the body timeout, how long a cut may take to show on a loaded machine. Without a deadline
#: on the whole body the trickle (a byte every 0.2 s) is never cut: any bound tells them apart.
CUT_SLACK = scaled(30)
STALLED_HEAD = (
    b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Authorization: Bearer ldp_0123456789abcdef\r\nIdempotency-Key: slow\r\n"
    b"Content-Length: 1000\r\n\r\n{"
)


@contextmanager
def slow_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, half idle (nothing sent), half sending a body a byte at a time
    (every 0.5 s) from one thread until the block ends."""
    sockets = [connect(port) for _ in range(count)]
    trickling = sockets[: count // 2]
    for sock in trickling:
        sock.sendall(STALLED_HEAD)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.5):
            for sock in trickling:
                with suppress(OSError):  # dropped by the server: what it does in the end
                    sock.send(b" ")

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield sockets
    finally:
        stop.set()
        thread.join()
        for sock in sockets:
            sock.close()


def post_batches(url: str, token: str, config_id: str, count: int) -> list[int]:
    """`count` batches of 3 reports from 8 client threads (keep-alive sessions, closed at
    the end)."""
    local = threading.local()
    sessions: list[requests.Session] = []

    def post(i: int) -> int:
        if not hasattr(local, "session"):
            local.session = requests.Session()
            sessions.append(local.session)
        response = local.session.post(
            f"{url}/v1/reports",
            json=batch(config_id, [i % 5, 1, 2]),
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
            timeout=30,
        )
        return response.status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(post, range(count)))
    for session in sessions:
        session.close()
    return statuses


def stored_batches(redis_client: Any) -> int:
    return int(redis_client.xlen(keys.stream("colors", 0)))  # the campaign has one shard


def test_normal_clients_are_served_while_256_slow_connections_are_open(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        api = collector.api()
        config_id, token = api.create_campaign(), api.create_token()
        with slow_connections(collector.port, SLOW):
            statuses = post_batches(collector.url, token, config_id, 200)
        assert statuses == [202] * 200
        assert stored_batches(redis_client) == 200


def test_a_stalled_or_trickling_body_gets_408_and_an_idle_connection_is_closed(
    redis_url: str, tmp_path: Path
) -> None:
    body_timeout = 1.0
    with served(redis_url, tmp_path, body_timeout=body_timeout) as collector:
        stalled, trickling, idle = (connect(collector.port) for _ in range(3))
        started = time.monotonic()
        cut_by = started + body_timeout + CUT_SLACK
        stalled.sendall(STALLED_HEAD)
        trickling.sendall(STALLED_HEAD)
        answer = b""
        # A byte every 0.2 s never lets a read wait long: only a deadline on the whole body
        # stops it.
        while b"\r\n\r\n" not in answer:
            assert time.monotonic() < cut_by, "the trickle was never cut"
            try:
                trickling.send(b" ")
                trickling.settimeout(0.2)
                answer += trickling.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
        deadline = time.monotonic() + body_timeout + CUT_SLACK
        for sock, received in ((stalled, b""), (trickling, answer)):
            received += read_until_closed(sock, deadline)
            status, body = status_and_json(received)
            assert (status, body["error"]["field"]) == (408, "body")  # type: ignore[index]
        assert read_until_closed(idle, started + KEEPALIVE + CUT_SLACK) == b""
        for sock in (stalled, trickling, idle):
            sock.close()
