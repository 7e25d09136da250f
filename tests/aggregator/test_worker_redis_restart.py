"""A scheduled worker outlives a Redis restart: the passes Redis fails are logged and the next
pass resumes from the checkpoints, losing and doubling nothing."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from stream_entries import make_config, register, simulate

from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.worker import Worker
from ldptel.store.redis_server import RedisServer

WINDOW = 1_700_006_400


def wait_for_n(client: Any, config: Any, n: int, timeout: float = 30) -> None:
    state = StateKey(WINDOW, config.config_id)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if read_state(client, config.name, [0], state, 8)[0] == n:
                return
        except redis.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"the worker never reached n = {n}"
        time.sleep(0.05)


def test_a_scheduled_worker_survives_a_redis_restart(tmp_path: Path, caplog: Any) -> None:
    server = RedisServer(tmp_path / "redis").start()
    client = redis.Redis.from_url(server.url, socket_timeout=2)
    worker = Worker(client, batch_entries=2)
    thread = threading.Thread(target=worker.run_forever, args=(0.05,), daemon=True)
    try:
        config = make_config()
        register(client, config)
        simulate(client, config, np.zeros(300, dtype=np.int64), window=WINDOW)
        with caplog.at_level(logging.ERROR, logger="ldptel.aggregator"):
            thread.start()
            wait_for_n(client, config, 300)

            server.stop()  # SIGTERM: Redis writes its AOF and exits; passes now fail
            deadline = time.monotonic() + 30
            while "pass failed" not in caplog.text:
                assert time.monotonic() < deadline and thread.is_alive()
                time.sleep(0.05)
            server.start()  # same port, same data

            simulate(client, config, np.ones(200, dtype=np.int64), window=WINDOW, seed=1)
            wait_for_n(client, config, 500)
        assert thread.is_alive()
    finally:
        worker.stop()
        thread.join(10)
        client.close()
        server.cleanup()
    assert not thread.is_alive()
