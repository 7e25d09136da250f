"""A pass over campaigns with nothing new (aggregator/worker.py, run_pass): idle shards are
found for all campaigns in one pipeline and cost no lease, no step and no round trip each;
a shard with new entries is drained as before; an idle stream is still trimmed."""

from __future__ import annotations

from typing import Any

import numpy as np
from stream_entries import make_config, old_and_recent_entries, register, simulate

from ldptel.aggregator.lease import Lease
from ldptel.aggregator.shard import ShardStep
from ldptel.aggregator.worker import Worker
from ldptel.store import keys
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400


def commands(client: Any) -> dict[str, int]:
    """Calls per command so far (INFO commandstats), the INFO calls themselves left out."""
    stats = client.info("commandstats")
    return {name: int(entry["calls"]) for name, entry in stats.items() if name != "cmdstat_info"}


def calls_during(client: Any, action: Any) -> dict[str, int]:
    before = commands(client)
    action()
    after = commands(client)
    return {
        name: calls - before.get(name, 0)
        for name, calls in after.items()
        if calls != before.get(name, 0)
    }


def test_an_idle_pass_takes_no_lease_and_a_few_pipelines_for_all_campaigns(
    redis_client: Any,
) -> None:
    configs = [make_config(f"idle{i}", shards=2) for i in range(6)]
    for config in configs:
        register(redis_client, config)
        simulate(redis_client, config, np.zeros(50, dtype=np.int64), window=WINDOW)
    worker = Worker(redis_client)
    assert worker.run_pass().reports == 6 * 50

    calls = calls_during(redis_client, worker.run_pass)

    assert "cmdstat_eval" not in calls and "cmdstat_evalsha" not in calls  # no lease, no step
    assert "cmdstat_watch" not in calls
    # Per shard: its checkpoint, first and last entry, its pending reports; per campaign its
    # record; SMEMBERS once. No TIME, no XTRIM: no stream holds a counted entry below its
    # checkpoint's.
    assert calls == {
        "cmdstat_smembers": 1,
        "cmdstat_hgetall": 6,
        "cmdstat_get": 12,
        "cmdstat_xrange": 12,
        "cmdstat_xrevrange": 12,
        "cmdstat_hkeys": 12,
    }
    stats = worker.run_pass()
    assert (stats.entries, stats.shards, stats.idle_shards) == (0, 0, 12)


def test_new_entries_on_one_shard_drain_only_that_shard(redis_client: Any) -> None:
    configs = [make_config(f"busy{i}") for i in range(3)]
    for config in configs:
        register(redis_client, config)
        simulate(redis_client, config, np.zeros(20, dtype=np.int64), window=WINDOW)
    worker = Worker(redis_client)
    worker.run_pass()

    simulate(redis_client, configs[1], np.ones(30, dtype=np.int64), window=WINDOW, seed=4)
    stats = worker.run_pass()

    assert (stats.reports, stats.shards, stats.idle_shards, stats.reports_built) == (30, 1, 2, 1)
    assert worker.run_pass().idle_shards == 3


def test_an_idle_stream_is_trimmed_past_its_retention(redis_client: Any) -> None:
    config = make_config("old", retention_seconds=3600)
    register(redis_client, config)
    ids = old_and_recent_entries(redis_client, config, [9_000_000, 8_000_000, 7_000_000])
    lease = Lease(redis_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    ShardStep(redis_client, Registry(redis_client), config.name, 0).run(lease.token, 3)
    lease.release()  # all three counted, none trimmed yet

    stats = Worker(redis_client).run_pass()

    assert (stats.idle_shards, stats.entries) == (1, 0)
    # Past retention, but the checkpoint's own entry stays (MINID removes ids below it).
    remaining = [entry_id for entry_id, _ in redis_client.xrange(keys.stream(config.name, 0))]
    assert remaining == ids[2:]
