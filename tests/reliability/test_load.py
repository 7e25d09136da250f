"""A bounded load ramp on loopback against `ldptel collector serve` (1, 4, 16 and 64
concurrent clients), and a collector worker SIGKILLed under load: every acknowledged batch is
stored exactly once, nothing unacknowledged is stored, and no answer is a 5xx.
(Throughput and p99 per step are measured in benchmarks/collector_slow_clients.py.)"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from load_clients import assert_exactly_once, setup
from served_collector import served
from waiting import wait_for

RAMP = (1, 4, 16, 64)
BATCHES_PER_STEP = 192


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
        replaced = lambda: len(set(collector.worker_pids()) - set(killed)) >= 2  # noqa: E731
        wait_for(replaced, "gunicorn replaced the killed workers")
        assert len(client.acknowledged) == 400
        assert_exactly_once(client, redis_client)
