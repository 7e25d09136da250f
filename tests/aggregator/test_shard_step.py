"""The shard step: every stream entry is counted exactly once into its window state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from stream_entries import append, dump_states, make_config, register, simulate

from ldptel.aggregator.lease import Lease
from ldptel.aggregator.shard import ShardStep
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.worker import Worker
from ldptel.store import keys
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400  # a day boundary


def expected_support(config: Any, values: np.ndarray, batch_size: int, seed: int) -> np.ndarray:
    """The support the worker must find: the same perturbation, counted directly."""
    oracle = config.build_oracle()
    rng = np.random.default_rng(seed)
    total = np.zeros(oracle.support_size, dtype=np.int64)
    for start in range(0, len(values), batch_size):
        total += oracle.support(oracle.perturb_batch(values[start : start + batch_size], rng))
    return total


def test_a_pass_counts_every_entry_once(redis_client: Any) -> None:
    config = make_config(shards=3)
    register(redis_client, config)
    values = np.random.default_rng(1).integers(0, 8, 5000)
    simulate(redis_client, config, values, window=WINDOW, batch_size=70, seed=3)

    stats = Worker(redis_client, batch_entries=7).run_pass()

    assert (stats.entries, stats.reports, stats.quarantined) == (72, 5000, 0)
    n, support = read_state(
        redis_client, config.name, range(3), StateKey(WINDOW, config.config_id), 8
    )
    assert n == 5000
    assert support.tolist() == expected_support(config, values, 70, 3).tolist()


def test_a_second_pass_adds_nothing_and_new_entries_are_added(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.zeros(300, dtype=np.int64), window=WINDOW)
    worker = Worker(redis_client, batch_entries=2)
    worker.run_pass()
    before = dump_states(redis_client)

    assert worker.run_pass().entries == 0
    assert dump_states(redis_client) == before

    simulate(redis_client, config, np.zeros(100, dtype=np.int64), window=WINDOW, seed=9)
    assert worker.run_pass().reports == 100
    state = StateKey(WINDOW, config.config_id)
    assert read_state(redis_client, config.name, [0], state, 8)[0] == 400


def test_a_crash_before_exec_applies_nothing(redis_client: Any, monkeypatch: Any) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.ones(500, dtype=np.int64), window=WINDOW)
    lease = Lease(redis_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    step = ShardStep(redis_client, Registry(redis_client), config.name, 0)

    import redis.client

    def crash(self: Any, raise_on_error: bool = True) -> None:
        raise ConnectionError("worker died before EXEC")

    with monkeypatch.context() as patched:
        patched.setattr(redis.client.Pipeline, "execute", crash)
        with pytest.raises(ConnectionError):
            step.run(lease.token, 3)
    assert dump_states(redis_client) == {}
    assert redis_client.get(keys.checkpoint(config.name, 0)) is None

    while not step.run(lease.token, 3).caught_up:
        pass
    state = StateKey(WINDOW, config.config_id)
    assert read_state(redis_client, config.name, [0], state, 8)[0] == 500


def test_a_step_that_raced_another_worker_applies_nothing(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.ones(200, dtype=np.int64), window=WINDOW)
    lease = Lease(redis_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    step = ShardStep(redis_client, Registry(redis_client), config.name, 0)
    original = step._parse

    def parse_while_another_worker_commits(entries: Any) -> Any:
        # Between our XRANGE and our EXEC the checkpoint moves (another owner committed).
        redis_client.set(keys.checkpoint(config.name, 0), entries[0][0])
        return original(entries)

    step._parse = parse_while_another_worker_commits  # type: ignore[method-assign]
    result = step.run(lease.token, 10)

    assert result.lost and result.reports == 0
    assert dump_states(redis_client) == {}


def test_a_worker_that_lost_its_lease_cannot_apply(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.ones(200, dtype=np.int64), window=WINDOW)
    mine = Lease(redis_client, keys.lease(config.name, 0), "a", ttl_ms=100)
    assert mine.acquire()
    redis_client.delete(keys.lease(config.name, 0))  # expired...
    assert Lease(redis_client, keys.lease(config.name, 0), "b").acquire()  # ...and taken

    result = ShardStep(redis_client, Registry(redis_client), config.name, 0).run(mine.token, 10)

    assert result.lost
    assert dump_states(redis_client) == {}


def test_leases_exclude_other_workers_but_not_a_restart_of_the_same_one(
    redis_client: Any,
) -> None:
    key = keys.lease("c", 0)
    first = Lease(redis_client, key, "worker-a")
    assert first.acquire()
    assert not Lease(redis_client, key, "worker-b").acquire()
    restarted = Lease(redis_client, key, "worker-a")
    assert restarted.acquire()  # a restarted process with the same worker id
    first.release()  # the old token no longer owns it: nothing happens
    assert redis_client.get(key).decode() == restarted.token
    restarted.release()
    assert redis_client.get(key) is None
    assert Lease(redis_client, key, "worker-b").acquire()


def test_batches_of_different_configs_never_mix(redis_client: Any) -> None:
    old = make_config(epsilon=1.0)
    new = make_config(epsilon=2.0)
    register(redis_client, old)
    register(redis_client, new)  # the campaign's current config is now `new`
    oracle_old, oracle_new = old.build_oracle(), new.build_oracle()
    rng = np.random.default_rng(0)
    append(redis_client, old, oracle_old.perturb_batch(np.zeros(40, dtype=int), rng), window=WINDOW)
    append(redis_client, new, oracle_new.perturb_batch(np.ones(60, dtype=int), rng), window=WINDOW)

    Worker(redis_client).run_pass()

    for config, n in ((old, 40), (new, 60)):
        state = StateKey(WINDOW, config.config_id)
        assert read_state(redis_client, config.name, [0], state, 8)[0] == n
