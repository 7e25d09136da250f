"""Redis killed mid-run: clients get 503 (never a 2xx for an unstored batch), and after a
restart from the same append-only file every acknowledged batch is there, once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
import redis
import requests
from collector_api import Api, batch, serve
from waiting import scaled, wait_for

from ldptel.store import keys
from ldptel.store.redis_server import RedisServer

BATCHES = 120

#: fsync `always`: Redis has written each batch to its AOF before it answers. With `everysec`
#: a busy disk makes Redis postpone the write itself by up to 2 s while it still answers
#: ("Asynchronous AOF fsync is taking too long" in its log), and a SIGKILL then loses batches
#: Redis acknowledged: 16 and 17 of 120 lost in 2 of 2 runs under a CPU hog. What this checks
#: is the collector's answer (never a 2xx Redis did not acknowledge), not Redis's trade-off.
FSYNC_ALWAYS = ("--appendfsync", "always")


class Sender(threading.Thread):
    """A client that sends batches one after another, retrying each (same key) until 202."""

    def __init__(self, api: Api, token: str, config_id: str) -> None:
        super().__init__(daemon=True)
        self.api, self.token, self.config_id = api, token, config_id
        self.acknowledged: dict[str, int] = {}
        self.statuses: list[int] = []

    def run(self) -> None:
        for i in range(BATCHES):
            key, values = uuid.uuid4().hex, [i % 5] * (1 + i % 7)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    response = self.api.post_reports(
                        self.token, batch(self.config_id, values), key=key
                    )
                except requests.ConnectionError:
                    continue
                self.statuses.append(response.status_code)
                if response.status_code == 202:
                    self.acknowledged[key] = response.json()["accepted"]
                    break
                time.sleep(0.01)
            time.sleep(0.002)


@pytest.mark.slow
def test_killed_redis_gives_503s_and_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    data_dir = tmp_path / "redis"
    first = RedisServer(data_dir, appendonly=True, extra_args=FSYNC_ALWAYS).start()
    server = serve({"redis_url": first.url})
    try:
        api = Api(server.url)
        config_id, token = api.create_campaign(), api.create_token()
        sender = Sender(api, token, config_id)
        sender.start()
        wait_for(lambda: len(sender.acknowledged) >= 30, "30 batches acknowledged")
        first.kill()
        wait_for(lambda: 503 in sender.statuses, "a 503 while Redis was down")
        second = RedisServer(data_dir, port=first.port, appendonly=True, extra_args=FSYNC_ALWAYS)
        second.start()
        try:
            sender.join(timeout=scaled(120))
            assert not sender.is_alive()
            assert 503 in sender.statuses
            assert set(sender.statuses) <= {202, 503}
            assert len(sender.acknowledged) == BATCHES
            client = redis.Redis.from_url(second.url)
            stored = client.xrange(keys.stream("colors", 0))
            assert len(stored) == BATCHES  # every acknowledged batch, none twice
            assert sum(int(fields[b"n"]) for _, fields in stored) == sum(
                sender.acknowledged.values()
            )
            for key in sender.acknowledged:
                assert client.exists(keys.idempotency("colors", 0, key))
            client.close()
        finally:
            second.cleanup()
    finally:
        server.stop()
        first.cleanup()
