"""A bounded load ramp on loopback against `ldptel collector serve` (1, 4, 16 and 64
concurrent clients), and a collector worker SIGKILLed under load: every acknowledged batch is
stored exactly once, nothing unacknowledged is stored, and no answer is a 5xx.
(Throughput and p99 per step are measured in benchmarks/collector_slow_clients.py.)"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from collector_api import batch
from served_collector import Served, served

from ldptel.store import codec, keys

RAMP = (1, 4, 16, 64)
BATCHES_PER_STEP = 192


class Client:
    """Sends batches, each retried under its key until 202 (connection errors and 503 are
    retried; any other answer fails the test)."""

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
            except requests.ConnectionError:
                continue  # a killed worker's connection: retry under the same key
            with self.lock:
                self.statuses[response.status_code] += 1
            if response.status_code == 202:
                with self.lock:
                    self.acknowledged[key] = len(values)
                return
            assert response.status_code == 503, response.text
        raise AssertionError(f"batch {key} never acknowledged")


def stored(redis_client: Any) -> list[codec.StreamEntry]:
    return [codec.decode(fields) for _, fields in redis_client.xrange(keys.stream("colors", 0))]


def assert_exactly_once(client: Client, redis_client: Any) -> None:
    entries = stored(redis_client)
    assert len(entries) == len(client.acknowledged)  # nothing doubled, nothing extra
    assert sum(e.n for e in entries) == sum(client.acknowledged.values())
    assert not any(status >= 500 and status != 503 for status in client.statuses)


def setup(collector: Served) -> Client:
    api = collector.api()
    config_id, token = api.create_campaign(), api.create_token()
    return Client(collector.url, token, config_id)


def test_a_load_ramp_is_stored_exactly_once(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        client = setup(collector)
        for concurrency in RAMP:
            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(client.send, range(BATCHES_PER_STEP)))
        assert len(client.acknowledged) == len(RAMP) * BATCHES_PER_STEP
        assert client.statuses == Counter({202: len(RAMP) * BATCHES_PER_STEP})
        assert_exactly_once(client, redis_client)


def test_a_worker_killed_under_load_loses_and_doubles_nothing(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        client = setup(collector)
        killed: list[int] = []

        def kill_workers() -> None:
            # Two kills, each once some batches went through (gunicorn boots a new worker).
            for _ in range(2):
                target = len(client.acknowledged) + 40
                deadline = time.monotonic() + 30
                while len(client.acknowledged) < target and time.monotonic() < deadline:
                    time.sleep(0.01)
                pid = collector.worker_pids()[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        killer = threading.Thread(target=kill_workers, daemon=True)
        killer.start()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(client.send, range(400)))
        killer.join(timeout=60)
        assert len(killed) == 2
        assert len(client.acknowledged) == 400
        assert_exactly_once(client, redis_client)
