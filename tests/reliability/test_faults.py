"""Faults under load, against `ldptel collector serve`: Redis SIGKILLed and restarted from its
append-only file (fsync `always` and `everysec`), and the gunicorn master SIGKILLed and the
collector started again. Clients retry each batch under its key until acknowledged; every
acknowledged batch is stored exactly once under `always`; under `everysec` Redis may answer
writes it has not yet written to its AOF (docs/collector.md, "Durability"), and none is
doubled."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import redis
from load_clients import BATCHES, assert_exactly_once, assert_none_doubled, send_while, setup
from served_collector import served
from waiting import wait_for

from ldptel.store.redis_server import RedisServer


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_redis_killed_under_load(tmp_path: Path, fsync: str) -> None:
    data_dir = tmp_path / "redis"
    options = {"appendonly": True, "extra_args": ["--appendfsync", fsync]}
    first = RedisServer(data_dir, **options).start()  # type: ignore[arg-type]
    restarted: list[RedisServer] = []
    try:
        with served(first.url, tmp_path) as collector:
            client = setup(collector)

            def kill_and_restart() -> None:
                first.kill()
                # Restarted once clients are told to retry (before it, a quick restart can
                # hide inside the collector's one reconnect attempt).
                wait_for(lambda: 503 in client.statuses, "a 503 while Redis was down")
                second = RedisServer(data_dir, port=first.port, **options)  # type: ignore[arg-type]
                restarted.append(second.start())

            send_while(client, kill_and_restart)
            store = redis.Redis.from_url(restarted[0].url)
            if fsync == "always":
                assert_exactly_once(client, store)
            else:  # Redis may have answered writes not yet in its AOF: none lost is its luck
                assert_none_doubled(client, store)
            store.close()
    finally:
        for server in restarted:
            server.cleanup()
        first.cleanup()


def test_the_master_killed_under_load_loses_and_doubles_nothing(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    with served(redis_url, tmp_path) as collector:
        client = setup(collector)
        workers = collector.worker_pids()
        again: list[Any] = []

        def kill_master_and_serve_again() -> None:
            collector.process.send_signal(signal.SIGKILL)
            collector.process.wait()
            # Orphaned workers notice their parent is gone and exit, releasing the port.
            wait_for(lambda: not any(alive(pid) for pid in workers), "the orphaned workers left")
            replacement = served(redis_url, tmp_path, port=collector.port)
            again.append(replacement)
            replacement.__enter__()

        try:
            send_while(client, kill_master_and_serve_again)
            for i in range(BATCHES, BATCHES + 50):  # served by the new collector only
                client.send(i)
        finally:
            for replacement in again:
                replacement.__exit__(None, None, None)
        assert len(again) == 1 and len(client.acknowledged) == BATCHES + 50
        assert_exactly_once(client, redis_client)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
