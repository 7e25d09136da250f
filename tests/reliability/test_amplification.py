"""A request's work and memory are bounded by what a valid batch of its campaign can be: a
4 KiB gzip body that inflates to 4 MiB of `{}` is refused (413) once it passes the campaign's
cap, before any JSON object is built. Under 16 senders of such bombs, every worker's RSS stays
within 2x of its idle RSS, and normal batches are still stored. And a token's refused requests
count against its rate limit: a flood of bombs from one token is answered 429 before the
bodies are inflated, while another token's clients are served."""

from __future__ import annotations

import functools
import gzip
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests
from collector_api import batch
from served_collector import Served, connect, rss_bytes, served, unread_by_server
from waiting import wait_for

from ldptel.collector.ingest import ENVELOPE_BYTES
from ldptel.store import keys

SENDERS = 16
BOMBS_PER_SENDER = 12
INFLATED = 4 * 1024 * 1024


@functools.cache  # 4 MiB compressed at level 9: built once per config id and order
def bomb(config_id: str, *, campaign_first: bool) -> bytes:
    """~4 KiB of gzip that inflates to 4 MiB: a batch of ~1.4 million empty reports."""
    reports = b"[" + b"{}," * ((INFLATED - 200) // 3) + b"{}]"
    head = b'"campaign":"colors","config_id":"' + config_id.encode() + b'"'
    text = b"{" + (head + b',"reports":' + reports if campaign_first else
                   b'"reports":' + reports + b"," + head) + b"}"  # fmt: skip
    return gzip.compress(text, compresslevel=9)


def post(session: requests.Session, url: str, token: str, data: bytes) -> requests.Response:
    return session.post(
        f"{url}/v1/reports",
        data=data,
        headers={
            "Authorization": f"Bearer {token}",
            "Idempotency-Key": uuid.uuid4().hex,
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        },
        timeout=60,
    )


def warm_up(collector: Served, token: str, config_id: str) -> None:
    """Normal batches on fresh connections, so every worker has loaded what it serves with."""
    for i in range(40):
        with requests.Session() as session:
            body = gzip.compress(str(batch(config_id, [i % 5])).replace("'", '"').encode())
            assert post(session, collector.url, token, body).status_code == 202


class PeakRss:
    """Samples every worker's RSS until stopped; keeps each one's peak."""

    def __init__(self, pids: list[int]) -> None:
        self.peaks = {pid: rss_bytes(pid) for pid in pids}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.stop.wait(0.02):
            for pid in self.peaks:
                self.peaks[pid] = max(self.peaks[pid], rss_bytes(pid))

    def finish(self) -> dict[int, int]:
        self.stop.set()
        self.thread.join()
        return self.peaks


def test_a_gzip_bomb_is_refused_at_the_campaigns_cap_without_inflating_it(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        api = collector.api()
        config_id, token = api.create_campaign(), api.create_token()
        data = bomb(config_id, campaign_first=True)
        assert len(data) < 8 * 1024
        response = post(api.session, collector.url, token, data)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["field"] == "body"
        # DE's widest report is {"y":4294967295}: the cap is far below 4 MiB.
        cap = int(error["reason"].split()[2])
        assert ENVELOPE_BYTES < cap < 512 * 1024


def test_under_16_bomb_senders_worker_rss_stays_within_2x_idle(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        api = collector.api()
        config_id, token = api.create_campaign(), api.create_token()
        warm_up(collector, token, config_id)
        idle = {pid: rss_bytes(pid) for pid in collector.worker_pids()}
        bombs = [bomb(config_id, campaign_first=first) for first in (True, False)]
        peak = PeakRss(list(idle))

        def send(sender: int) -> list[int]:
            with requests.Session() as session:
                return [
                    post(session, collector.url, token, bombs[(sender + i) % 2]).status_code
                    for i in range(BOMBS_PER_SENDER)
                ]

        with ThreadPoolExecutor(SENDERS) as pool:
            statuses = [s for sent in pool.map(send, range(SENDERS)) for s in sent]
        with requests.Session() as session:
            normal = post(session, collector.url, token, gzip.compress(
                str(batch(config_id, [1, 2])).replace("'", '"').encode()))  # fmt: skip
        peaks = peak.finish()
        assert statuses == [413] * SENDERS * BOMBS_PER_SENDER
        assert normal.status_code == 202
        assert redis_client.xlen(keys.stream("colors", 0)) == 40 + 1  # warm-up + normal
        for pid, rss in idle.items():
            assert peaks[pid] <= 2 * rss, (
                f"worker {pid}: idle {rss >> 20} MiB, peak {peaks[pid] >> 20} MiB"
            )


def test_a_bomb_flood_from_one_token_gets_429_while_another_token_is_served(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    limit, workers, normal_batches = 20, 2, 8
    # An hour's window: the flood stays in one window unless it straddles the hour.
    with served(
        redis_url, tmp_path, workers=workers, rate_limit=limit, rate_limit_seconds=3600
    ) as collector:
        api = collector.api()
        config_id = api.create_campaign()
        flooder, shop = api.create_token("flooder"), api.create_token("shop")
        bombs = [bomb(config_id, campaign_first=first) for first in (True, False)]

        def flood(sender: int) -> list[int]:
            with requests.Session() as session:
                return [
                    post(session, collector.url, flooder, bombs[(sender + i) % 2]).status_code
                    for i in range(BOMBS_PER_SENDER)
                ]

        def shop_clients() -> list[int]:
            body = str(batch(config_id, [1, 2])).replace("'", '"').encode()
            with requests.Session() as session:
                return [
                    post(session, collector.url, shop, gzip.compress(body)).status_code
                    for _ in range(normal_batches)
                ]

        with ThreadPoolExecutor(SENDERS + 1) as pool:
            floods = [pool.submit(flood, sender) for sender in range(SENDERS)]
            served_statuses = pool.submit(shop_clients).result()
            statuses = [status for sent in floods for status in sent.result()]
        limited = post(api.session, collector.url, flooder, bombs[0])

    assert served_statuses == [202] * normal_batches
    assert redis_client.xlen(keys.stream("colors", 0)) == normal_batches
    assert set(statuses) == {413, 429}
    # `limit` refusals, plus at most one per sender already past the check when the count
    # reached it; twice that if the flood straddled the window's end.
    assert limit <= statuses.count(413) <= 2 * (limit + SENDERS)
    assert limited.status_code == 429 and "refused requests" in limited.json()["error"]["reason"]
    assert 1 <= int(limited.headers["Retry-After"]) <= 3600


def test_a_refusal_is_answered_late_without_holding_the_worker(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    """The refusal delay (LDPTEL_REFUSAL_DELAY_SECONDS): while 8 bombs wait out theirs on the
    only worker, a valid batch of the same token is stored and answered; then the bombs get
    their 413. (A blocking sleep would answer the bombs first, 8 x 3 s later.)"""
    env = {"LDPTEL_REFUSAL_DELAY_SECONDS": "3"}
    with served(redis_url, tmp_path, workers=1, env=env) as collector:
        api = collector.api()
        config_id, token = api.create_campaign(), api.create_token()
        warm_up(collector, token, config_id)
        data = bomb(config_id, campaign_first=True)
        head = (
            f"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(data)}\r\n"
        )
        with ExitStack() as stack:
            bombs = [stack.enter_context(connect(collector.port)) for _ in range(8)]
            for sock in bombs:
                key = uuid.uuid4().hex
                sock.sendall(f"{head}Idempotency-Key: {key}\r\n\r\n".encode() + data)
            read = lambda: all(unread_by_server(collector.port, s) == 0 for s in bombs)  # noqa: E731
            wait_for(read, "the worker read every bomb")
            with requests.Session() as session:
                normal = post(session, collector.url, token, gzip.compress(
                    str(batch(config_id, [3])).replace("'", '"').encode()))  # fmt: skip
            assert normal.status_code == 202
            assert [early_answer(sock) for sock in bombs] == [b""] * 8  # all still waiting
            for sock in bombs:
                sock.settimeout(30)
                assert sock.recv(12) == b"HTTP/1.1 413"


def early_answer(sock: socket.socket) -> bytes:
    """What the server has answered on `sock` so far (b"": nothing yet), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(200, socket.MSG_PEEK)
    except BlockingIOError:
        return b""
