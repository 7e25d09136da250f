"""Corrupt entries are quarantined (with a reason, counted, never fatal); entries land in
their windows; the stream is trimmed only below the checkpoint and after retention."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from stream_entries import append, dump_states, make_config, old_and_recent_entries, register

from ldptel.aggregator.lease import Lease
from ldptel.aggregator.report import list_windows
from ldptel.aggregator.shard import ShardStep
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.worker import Worker, trim_threshold
from ldptel.store import keys
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400


def good_batch(config: Any, n: int, value: int = 0) -> Any:
    return config.build_oracle().perturb_batch(np.full(n, value), np.random.default_rng(n))


def test_corrupt_entries_are_quarantined_with_their_reason(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    stream = keys.stream(config.name, 0)
    good = config.build_oracle().pack(good_batch(config, 10))
    # (reason in words, its code) -> the entry's fields
    corrupt = {
        ("missing field p", "malformed_entry"): {
            "c": config.config_id, "w": WINDOW, "n": 10, "l": "",
        },
        ("unknown config id", "unknown_config"): {
            "c": "0" * 16, "w": WINDOW, "n": 10, "p": good, "l": "",
        },
        ("expected 40 bytes", "reports_undecodable"): {
            "c": config.config_id, "w": WINDOW, "n": 10, "p": good[:-1],
        },
        ("field n is not an integer", "malformed_entry"): {
            "c": config.config_id, "w": WINDOW, "n": "x", "p": good,
        },
        ("field n must be >= 1", "malformed_entry"): {
            "c": config.config_id, "w": WINDOW, "n": 0, "p": b"",
        },
        ("not a multiple", "window_not_aligned"): {
            "c": config.config_id, "w": WINDOW + 1, "n": 10, "p": good,
        },
        ("privacy level", "level_not_defined"): {
            "c": config.config_id, "w": WINDOW, "n": 10, "p": good, "l": "x",
        },
        ("outside the oracle's range", "report_values_out_of_range"): {
            "c": config.config_id, "w": WINDOW, "n": 1, "p": np.uint32(8).tobytes(), "l": "",
        },
    }  # fmt: skip
    append(redis_client, config, good_batch(config, 10), window=WINDOW)
    for fields in corrupt.values():
        redis_client.xadd(stream, fields)
    last = append(redis_client, config, good_batch(config, 5), window=WINDOW)

    stats = Worker(redis_client, batch_entries=4).run_pass()

    assert stats.quarantined == len(corrupt)
    assert stats.reports == 15
    quarantined = redis_client.xrange(keys.quarantine(config.name, 0))
    found = [(f[b"reason"].decode(), f[b"code"].decode()) for _, f in quarantined]
    for (expected, code), (reason, found_code) in zip(corrupt, found, strict=True):
        assert expected in reason and found_code == code
    assert all(b"entry" in fields for _, fields in quarantined)
    assert redis_client.get(keys.checkpoint(config.name, 0)) == last
    state = StateKey(WINDOW, config.config_id)
    assert read_state(redis_client, config.name, [0], state, 8)[0] == 15


def test_a_corrupt_entry_does_not_spoil_the_good_ones_read_with_it(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    stream = keys.stream(config.name, 0)
    batch = {"y": np.array([0, 1, 2], dtype=np.uint32)}
    append(redis_client, config, batch, window=WINDOW)
    bad = {"y": np.array([1, 99], dtype=np.uint32)}  # right size, value out of range
    redis_client.xadd(
        stream, {"c": config.config_id, "w": WINDOW, "n": 2, "p": bad["y"].tobytes(), "l": ""}
    )
    append(redis_client, config, batch, window=WINDOW)

    Worker(redis_client).run_pass()

    n, support = read_state(redis_client, config.name, [0], StateKey(WINDOW, config.config_id), 8)
    assert n == 6
    assert support.tolist() == [2, 2, 2, 0, 0, 0, 0, 0]
    assert redis_client.xlen(keys.quarantine(config.name, 0)) == 1


def test_entries_land_in_their_own_windows_also_when_late(redis_client: Any) -> None:
    config = make_config(window_seconds=3600)
    register(redis_client, config)
    first, second = WINDOW, WINDOW + 3600
    append(redis_client, config, {"y": np.array([0, 0], dtype=np.uint32)}, window=first)
    append(redis_client, config, {"y": np.array([1, 1, 1], dtype=np.uint32)}, window=second)
    worker = Worker(redis_client)
    worker.run_pass()
    # A late batch: the collector assigned it to the first window, it arrives after the second.
    append(redis_client, config, {"y": np.array([2], dtype=np.uint32)}, window=first)
    worker.run_pass()

    def state(window: int) -> tuple[int, list[int]]:
        n, support = read_state(
            redis_client, config.name, [0], StateKey(window, config.config_id), 8
        )
        return n, support.tolist()

    assert state(first) == (3, [2, 0, 1, 0, 0, 0, 0, 0])
    assert state(second) == (3, [0, 3, 0, 0, 0, 0, 0, 0])
    assert list_windows(redis_client, Registry(redis_client), config.name) == [first, second]
    assert len(dump_states(redis_client)) == 2


def test_the_trim_threshold_is_below_both_checkpoint_and_retention() -> None:
    day = 86_400_000
    now = 100 * day
    # Checkpoint older than the retention cut: trim everything below the checkpoint.
    assert trim_threshold(b"5000-3", now, 86_400) == "5000-3"
    # Checkpoint recent: trim only what is older than the retention.
    assert trim_threshold(f"{now - 10}-0".encode(), now, 86_400) == f"{99 * day}-0"


def test_trimming_removes_counted_entries_older_than_retention(redis_client: Any) -> None:
    config = make_config(retention_seconds=3600)
    register(redis_client, config)
    ids = old_and_recent_entries(redis_client, config, [7_200_000, 7_100_000, 60_000])

    Worker(redis_client).run_pass()

    remaining = [entry_id for entry_id, _ in redis_client.xrange(keys.stream(config.name, 0))]
    assert remaining == ids[2:]
    state = StateKey(WINDOW, config.config_id)
    assert read_state(redis_client, config.name, [0], state, 8)[0] == 3


def test_trimming_never_removes_uncounted_entries(redis_client: Any) -> None:
    config = make_config(retention_seconds=3600)
    register(redis_client, config)
    ids = old_and_recent_entries(redis_client, config, [9_000_000, 8_000_000, 7_000_000])
    worker = Worker(redis_client)
    lease = Lease(redis_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    ShardStep(redis_client, Registry(redis_client), config.name, 0).run(lease.token, 2)

    worker._trim(config.name, 0)

    # All three are past retention, but only the one below the checkpoint (ids[1]) may go.
    remaining = [entry_id for entry_id, _ in redis_client.xrange(keys.stream(config.name, 0))]
    assert remaining == ids[1:]


def test_entries_of_a_stored_config_that_guarantees_less_than_its_epsilon_are_quarantined(
    redis_client: Any,
) -> None:
    # A config stored before its integers were checked: pm at "epsilon 1" with
    # ln(heavy / light) = 6.9. It no longer loads, so its reports are never counted.
    weakened = {
        "name": "latency", "oracle": "pm", "epsilon": 1.0, "range": [0.0, 10.0],
        "params": {"resolution": 16, "heavy": 1000, "light": 1, "band": 4},
    }  # fmt: skip
    config_id = "00weakened000000"
    redis_client.set(keys.config(config_id), json.dumps(weakened))
    redis_client.hset(keys.campaign("latency"), mapping={"config_id": config_id, "retired": 0})
    redis_client.sadd(keys.campaigns(), "latency")
    fields = {"c": config_id, "w": WINDOW, "n": 1, "p": np.uint32(3).tobytes(), "l": ""}
    redis_client.xadd(keys.stream("latency", 0), fields)

    stats = Worker(redis_client).run_pass()

    assert (stats.quarantined, stats.reports) == (1, 0)
    ((_, moved),) = redis_client.xrange(keys.quarantine("latency", 0))
    assert moved[b"code"] == b"config_refused"
    assert b"params.light" in moved[b"reason"] and b"6.90776" in moved[b"reason"]
