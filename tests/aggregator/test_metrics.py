"""The aggregator's metrics and health endpoints (aggregator/metrics.py): the lag is exact at
every step, the probes follow the worker's state, and `--every` serves them."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import requests
from stream_entries import make_config, register, simulate
from waiting import wait_for

from ldptel.aggregator.metrics import AggregatorMetrics, HealthServer, unapplied_entries
from ldptel.aggregator.shard import StepResult
from ldptel.aggregator.worker import Worker
from ldptel.store import codec, keys

DAY = 86_400


def counted(client: Any, name: str, shard: int) -> int:
    """The lag by brute force: every entry after the checkpoint, read."""
    checkpoint = client.get(keys.checkpoint(name, shard))
    start = "(" + checkpoint.decode() if checkpoint else "-"
    return len(client.xrange(keys.stream(name, shard), min=start, max="+"))


def ingest_ids(client: Any, config: Any, windows: dict[int, int]) -> None:
    """Entries with the ids the collector's ingest script gives: <window ms>-0, -1, ..."""
    oracle = config.build_oracle()
    batch = oracle.perturb_batch(np.zeros(3, dtype=np.int64), np.random.default_rng(0))
    for window, entries in windows.items():
        for seq in range(entries):
            entry = codec.StreamEntry(config.config_id, window, 3, oracle.pack(batch), "")
            client.xadd(keys.stream(config.name, 0), codec.encode(entry), id=f"{window}000-{seq}")


def test_the_lag_is_exact_at_every_step(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    ingest_ids(redis_client, config, {DAY: 5, 3 * DAY: 4, 4 * DAY: 1})  # ingest-script ids
    simulate(redis_client, config, np.arange(700) % 8, window=5 * DAY)  # Redis's own ids
    lags = []

    def check(result: StepResult) -> None:
        lags.append(unapplied_entries(redis_client, config.name, 0))
        assert lags[-1] == counted(redis_client, config.name, 0)

    assert unapplied_entries(redis_client, config.name, 0) == 17
    Worker(redis_client, batch_entries=3, on_step=check).run_pass()
    assert lags == [14, 11, 8, 5, 2, 0]


def test_the_lag_ignores_entries_before_a_trimmed_checkpoint(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    ingest_ids(redis_client, config, {DAY: 6})
    redis_client.set(keys.checkpoint(config.name, 0), f"{DAY}000-3")
    redis_client.execute_command("XTRIM", keys.stream(config.name, 0), "MINID", f"{DAY}000-2")
    assert (
        unapplied_entries(redis_client, config.name, 0)
        == 2
        == counted(redis_client, config.name, 0)
    )


def test_the_probes_follow_the_worker() -> None:
    metrics = AggregatorMetrics(stale_seconds=60)
    with HealthServer(metrics, "127.0.0.1", 0) as server:

        def status(path: str) -> int:
            return requests.get(server.address + path, timeout=5).status_code

        assert (status("/healthz"), status("/readyz")) == (200, 503)  # no pass yet
        metrics.ready = True
        assert status("/readyz") == 200
        metrics.failed()
        assert (status("/healthz"), status("/readyz")) == (200, 503)
        metrics.last_progress -= 61  # nothing ended for longer than stale_seconds
        assert status("/healthz") == 503
        assert status("/nope") == 404


def test_every_mode_exports_passes_lag_and_failures(redis_client: Any, redis_url: str) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.arange(300) % 8, window=DAY)
    metrics = AggregatorMetrics(stale_seconds=60)
    worker = Worker(redis_client, metrics=metrics)
    thread = threading.Thread(target=worker.run_forever, args=(0.05,))
    thread.start()
    try:
        wait_for(lambda: metrics.last_success._value.get() != 0, "the first pass ended")
    finally:
        worker.stop()
        thread.join(timeout=30)
    with HealthServer(metrics, "127.0.0.1", 0) as server:
        text = requests.get(server.address + "/metrics", timeout=5).text
    assert "ldptel_aggregator_entries_applied_total 3.0" in text
    assert "ldptel_aggregator_reports_applied_total 300.0" in text
    assert 'ldptel_aggregator_lag_entries{campaign="screens",shard="0"} 0.0' in text
    assert "ldptel_aggregator_pass_seconds_count" in text


def test_a_failed_pass_makes_the_worker_unready() -> None:
    from ldptel.store.connection import connect

    metrics = AggregatorMetrics(stale_seconds=60)
    metrics.ready = True
    worker = Worker(connect("redis://127.0.0.1:1/0"), metrics=metrics)  # nothing listens
    thread = threading.Thread(target=worker.run_forever, args=(0.05,))
    thread.start()
    try:
        wait_for(lambda: metrics.passes_failed._value.get() != 0, "a pass failed")
    finally:
        worker.stop()
        thread.join(timeout=30)
    assert metrics.ready is False and metrics.alive()


@pytest.mark.parametrize("port", [-1, 70000])
def test_a_bad_health_port_is_an_error(port: int, capsys: Any) -> None:
    from ldptel.cli.main import main

    assert main(["aggregator", "run", "--health-port", str(port), "--redis-url", "redis://x"]) == 2
    assert "health_port" in capsys.readouterr().err
