"""A scheduled worker outlives a Redis restart: the passes Redis fails are logged and the next
pass resumes from the checkpoints, losing and doubling nothing."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import redis
from stream_entries import make_config, register, simulate
from waiting import scaled, wait_for

from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.worker import Worker
from ldptel.store.redis_server import RedisServer

WINDOW = 1_700_006_400


def wait_for_n(client: Any, config: Any, n: int) -> None:
    state = StateKey(WINDOW, config.config_id)

    def reached() -> bool:
        try:
            return bool(read_state(client, config.name, [0], state, 8)[0] == n)
        except (redis.ConnectionError, redis.TimeoutError):  # restarting, or slow to answer
            return False

    wait_for(reached, f"the worker reached n = {n}")


def test_a_scheduled_worker_survives_a_redis_restart(tmp_path: Path, caplog: Any) -> None:
    server = RedisServer(tmp_path / "redis").start()
    client = redis.Redis.from_url(server.url, socket_timeout=2)
    worker = Worker(client, batch_entries=2)
    thread = threading.Thread(target=worker.run_forever, args=(0.05,), daemon=True)

    def alive_and(condition: bool) -> bool:
        assert thread.is_alive(), "the worker's thread ended"
        return condition

    try:
        config = make_config()
        register(client, config)
        simulate(client, config, np.zeros(300, dtype=np.int64), window=WINDOW)
        with caplog.at_level(logging.ERROR, logger="ldptel.aggregator"):
            thread.start()
            wait_for_n(client, config, 300)

            server.stop()  # SIGTERM: Redis writes its AOF and exits; passes now fail
            wait_for(lambda: alive_and("pass failed" in caplog.text), "a failed pass")
            server.start()  # same port, same data

            simulate(client, config, np.ones(200, dtype=np.int64), window=WINDOW, seed=1)
            wait_for_n(client, config, 500)
        assert thread.is_alive()
    finally:
        worker.stop()
        thread.join(scaled(60))
        client.close()
        server.cleanup()
    assert not thread.is_alive()
