"""Load-generating clients for the reliability tests: each batch is retried under its
Idempotency-Key until acknowledged, and the store is checked for exactly-once."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from collector_api import batch
from served_collector import Served

from ldptel.store import codec, keys

#: Between retries of a batch the server did not take (503, connection refused or reset).
RETRY_PAUSE_SECONDS = 0.05
#: Batches `send_while` sends.
BATCHES = 300


class Client:
    """Sends batches, each retried under its key until 202, as the SDK does (a broken
    connection, even one that broke mid-answer, and 503 are retried; any other answer fails
    the test)."""

    def __init__(self, url: str, token: str, config_id: str) -> None:
        self.url, self.token, self.config_id = url, token, config_id
        self.acknowledged: dict[str, int] = {}
        self.statuses: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.local = threading.local()

    def session(self) -> requests.Session:
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
        return self.local.session  # type: ignore[no-any-return]

    def send(self, i: int) -> None:
        key, values = uuid.uuid4().hex, [i % 5] * (1 + i % 4)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                response = self.session().post(
                    f"{self.url}/v1/reports",
                    json=batch(self.config_id, values),
                    headers={"Authorization": f"Bearer {self.token}", "Idempotency-Key": key},
                    timeout=30,
                )
            except requests.RequestException:  # a killed worker (even mid-answer), or no collector
                time.sleep(RETRY_PAUSE_SECONDS)
                continue
            with self.lock:
                self.statuses[response.status_code] += 1
            if response.status_code == 202:
                with self.lock:
                    self.acknowledged[key] = len(values)
                return
            assert response.status_code == 503, response.text  # Redis down: retry later
            time.sleep(RETRY_PAUSE_SECONDS)
        raise AssertionError(f"batch {key} never acknowledged")


def send_while(
    client: Client, fault: Callable[[], None], batches: int = BATCHES, after: int = 60
) -> None:
    """`batches` more batches from 8 threads; `fault` runs in a thread once `after` of them
    are acknowledged."""
    before = len(client.acknowledged)

    def inject() -> None:
        deadline = time.monotonic() + 60
        while len(client.acknowledged) < before + after and time.monotonic() < deadline:
            time.sleep(0.01)
        fault()

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(client.send, range(batches)))
    injector.join(timeout=60)
    assert not injector.is_alive()
    assert len(client.acknowledged) == before + batches


def stored(redis_client: Any) -> list[codec.StreamEntry]:
    return [codec.decode(fields) for _, fields in redis_client.xrange(keys.stream("colors", 0))]


def assert_none_doubled(client: Client, redis_client: Any) -> None:
    """Every stored batch is an acknowledged one, stored once: what survives a Redis that lost
    acknowledged writes (`appendfsync everysec` with its writes postponed)."""
    entries = stored(redis_client)
    marks = redis_client.pipeline(transaction=False)
    for key in client.acknowledged:
        marks.exists(keys.idempotency("colors", 0, key))
    assert len(entries) == sum(marks.execute()) <= len(client.acknowledged)
    assert not any(status >= 500 and status != 503 for status in client.statuses)


def assert_exactly_once(client: Client, redis_client: Any) -> None:
    assert_none_doubled(client, redis_client)
    entries = stored(redis_client)
    assert len(entries) == len(client.acknowledged)  # so each acknowledged batch is stored
    assert sum(e.n for e in entries) == sum(client.acknowledged.values())


def setup(collector: Served) -> Client:
    api = collector.api()
    config_id, token = api.create_campaign(), api.create_token()
    return Client(collector.url, token, config_id)
