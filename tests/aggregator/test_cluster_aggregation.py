"""The aggregator on a real Redis Cluster (three masters on loopback): workers count every
entry exactly once, the window report equals a single server's for the same entries, and a
shard step whose slot moved to another node re-reads the slot map and applies once."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from stream_entries import append, make_config, register, simulate

from ldptel.aggregator import shard as shard_module
from ldptel.aggregator.lease import Lease
from ldptel.aggregator.reports import build_window, load_window
from ldptel.aggregator.shard import ShardStep
from ldptel.aggregator.state import StateKey, list_states, read_state
from ldptel.aggregator.worker import Worker
from ldptel.store import keys
from ldptel.store.connection import connect
from ldptel.store.registry import Registry

pytestmark = pytest.mark.slow

WINDOW = 1_700_006_400
SHARDS = 6
REPORTS = 6000


def populate(client: Any, shards: int = SHARDS, reports: int = REPORTS) -> Any:
    """The same registry and stream entries on any Redis (fixed seeds)."""
    config = make_config("screens", shards=shards)
    register(client, config)
    values = np.random.default_rng(5).integers(0, 8, reports)
    simulate(client, config, values, window=WINDOW, batch_size=100, seed=11)
    return config


def states(client: Any, config: Any) -> dict[tuple[int, StateKey], dict[bytes, bytes]]:
    """Every shard's window state hashes, by (shard, state)."""
    return {
        (shard, state): client.hgetall(state.redis_key(config.name, shard))
        for shard in range(config.shards)
        for state in list_states(client, config.name, [shard])
    }


def test_a_worker_on_the_cluster_reports_what_a_single_server_reports(
    cluster_client: Any, redis_client: Any
) -> None:
    config = populate(cluster_client)
    populate(redis_client)

    on_cluster = Worker(cluster_client, worker_id="cluster", batch_entries=7).run_pass()
    on_server = Worker(redis_client, worker_id="single", batch_entries=7).run_pass()

    assert (on_cluster.entries, on_cluster.reports, on_cluster.shards) == (60, REPORTS, SHARDS)
    assert on_server.reports == REPORTS
    assert Worker(cluster_client).run_pass().entries == 0  # nothing is counted twice
    nodes = {
        cluster_client.get_node_from_key(keys.checkpoint(config.name, shard)).name
        for shard in range(SHARDS)
    }
    assert len(nodes) == 3, "the shards' states and checkpoints live on all three masters"
    assert states(cluster_client, config) == states(redis_client, config)
    documents = [
        build_window(client, Registry(client), config.name, WINDOW, built_at=0)
        for client in (cluster_client, redis_client)
    ]
    assert documents[0] == documents[1]
    assert documents[0]["reports"][0]["n"] == REPORTS
    stored = load_window(cluster_client, config.name, WINDOW)
    assert stored is not None and stored["reports"][0]["n"] == REPORTS


def test_workers_racing_on_the_cluster_count_every_report_once(
    cluster_client: Any, redis_cluster_url: str
) -> None:
    config = populate(cluster_client)
    clients = [connect(redis_cluster_url) for _ in range(3)]
    workers = [
        Worker(client, worker_id=f"w{i}", batch_entries=3, build_reports=False)
        for i, client in enumerate(clients)
    ]
    threads = [threading.Thread(target=worker.run_pass) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    Worker(cluster_client, build_reports=False).run_pass()  # whatever a skipped shard left

    state = StateKey(WINDOW, config.config_id)
    n, support = read_state(cluster_client, config.name, range(SHARDS), state, 8)
    assert n == REPORTS
    assert support.sum() == REPORTS  # DE: each report supports exactly one item
    for client in clients:
        client.close()


def move_slot(cluster: Any, key: str, target: Any = None) -> Any:
    """Reshard `key`'s slot, keys included, to `target` (default another master), as
    redis-cli reshard does; returns the node it was on."""
    slot = cluster.keyslot(key)
    source = cluster.get_node_from_key(key)
    if target is None:
        target = next(node for node in cluster.get_primaries() if node.name != source.name)
    src, dst = (cluster.get_redis_connection(node) for node in (source, target))
    src_id, dst_id = (client.execute_command("CLUSTER MYID") for client in (src, dst))
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    while moving := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
        src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *moving)
    for node in cluster.get_primaries():
        cluster.get_redis_connection(node).execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    cluster.nodes_manager.initialize()
    return source


def test_a_step_whose_slot_moved_rereads_the_slot_map_and_applies_once(
    cluster_client: Any, redis_cluster_url: str, monkeypatch: Any
) -> None:
    config = populate(cluster_client, shards=1, reports=1000)
    worker_client = connect(redis_cluster_url)  # reads the slot map now
    lease = Lease(worker_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    stream = keys.stream(config.name, 0)
    before = move_slot(cluster_client, stream)
    refreshes = []
    real_refresh = shard_module.refresh_slots

    def refresh(client: Any) -> None:
        refreshes.append(client)
        real_refresh(client)

    monkeypatch.setattr(shard_module, "refresh_slots", refresh)

    result = ShardStep(worker_client, Registry(worker_client), config.name, 0).run(
        lease.token, 1000
    )

    assert refreshes == [worker_client], "the stale slot map answered MOVED"
    assert worker_client.get_node_from_key(stream).name != before.name
    assert (result.entries, result.reports, result.lost) == (10, 1000, False)
    state = StateKey(WINDOW, config.config_id)
    assert read_state(cluster_client, config.name, [0], state, 8)[0] == 1000
    worker_client.close()
    move_slot(cluster_client, stream, before)  # the other tests expect the initial layout


def test_a_crash_before_exec_applies_nothing_on_the_cluster(
    cluster_client: Any, monkeypatch: Any
) -> None:
    config = populate(cluster_client, shards=1, reports=500)
    lease = Lease(cluster_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    step = ShardStep(cluster_client, Registry(cluster_client), config.name, 0)

    import redis.client

    def crash(self: Any, raise_on_error: bool = True) -> None:
        raise ConnectionError("worker died before EXEC")

    # The step runs a plain pipeline on the slot's node (not redis-py's ClusterPipeline).
    with monkeypatch.context() as patched:
        patched.setattr(redis.client.Pipeline, "execute", crash)
        with pytest.raises(ConnectionError):
            step.run(lease.token, 3)
    assert cluster_client.get(keys.checkpoint(config.name, 0)) is None
    assert list_states(cluster_client, config.name, [0]) == []

    assert step.run(lease.token, 1000).reports == 500


def test_a_step_whose_connection_dies_while_watching_applies_nothing(
    cluster_client: Any, redis_cluster_url: str
) -> None:
    # After a connection error, redis-py's ClusterPipeline (8.1) re-sends MULTI/EXEC on a new
    # connection without the WATCH; the slot owner's plain pipeline raises WatchError instead.
    config = populate(cluster_client, shards=1, reports=500)
    lease = Lease(cluster_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    step = ShardStep(cluster_client, Registry(cluster_client), config.name, 0)
    other_client = connect(redis_cluster_url)
    parse = step._parse

    def parse_then_lose_the_connection(entries: Any) -> Any:
        parsed = parse(entries)
        node = cluster_client.get_node_from_key(keys.stream(config.name, 0))
        killer = connect(f"redis://{node.host}:{node.port}/0")
        killer.execute_command("CLIENT KILL TYPE normal SKIPME yes")
        killer.close()
        # Meanwhile another worker counts the same entries and moves the checkpoint.
        rival = ShardStep(other_client, Registry(other_client), config.name, 0)
        assert rival.run(lease.token, 1000).reports == 500
        return parsed

    step._parse = parse_then_lose_the_connection  # type: ignore[method-assign]
    assert step.run(lease.token, 1000).lost

    state = StateKey(WINDOW, config.config_id)
    assert read_state(cluster_client, config.name, [0], state, 8)[0] == 500
    other_client.close()


def test_a_packed_sketch_state_on_the_cluster_equals_a_single_servers(
    cluster_client: Any, redis_client: Any
) -> None:
    # An open-domain CMS campaign (65,536 cells: packed) over three shards; entries of 10
    # reports (sparse deltas: BITFIELD) then of 400 (dense: read under WATCH, rewritten).
    from ldptel.client.campaign import CampaignConfig
    from ldptel.client.hashing import item_keys
    from ldptel.client.oracles.sketch import KeySketch

    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "cms", "epsilon": 2, "max_length": 16, "shards": 3,
         "params": {"k": 256, "m": 256}}
    ).as_created()  # fmt: skip
    oracle = config.build_open()
    assert isinstance(oracle, KeySketch)
    words = item_keys(f"w{i % 50}" for i in range(2700))
    for client in (cluster_client, redis_client):
        register(client, config)
        rng = np.random.default_rng(9)
        for number, (start, size) in enumerate(
            [(i * 10, 10) for i in range(30)] + [(300 + i * 400, 400) for i in range(6)]
        ):
            batch = oracle.perturb_keys(words[start : start + size], rng)
            append(client, config, batch, window=WINDOW, shard=number % 3)
        Worker(client, batch_entries=1).run_pass()

    state = StateKey(WINDOW, config.config_id)
    on_cluster = read_state(cluster_client, "answers", range(3), state, 65536)
    on_server = read_state(redis_client, "answers", range(3), state, 65536)
    assert on_cluster[0] == on_server[0] == 2700
    assert on_cluster[1].tolist() == on_server[1].tolist()
    assert Worker(cluster_client).run_pass().entries == 0


def test_an_olh_report_log_on_the_cluster_equals_a_single_servers(
    cluster_client: Any, redis_client: Any
) -> None:
    # An open-domain OLH campaign (window state: a report log per shard, APPENDed in the
    # step's transaction) over three shards: the same logs and the same window report.
    from ldptel.aggregator.reports import Candidates
    from ldptel.client.campaign import CampaignConfig
    from ldptel.client.hashing import item_keys
    from ldptel.client.oracles.olh import OpenDomainOLH

    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "olh", "epsilon": 3, "max_length": 16, "shards": 3}
    ).as_created()
    oracle = config.build_open()
    assert isinstance(oracle, OpenDomainOLH)
    words = item_keys(["tea"] * 900 + ["mate"] * 600 + [f"w{i}" for i in range(900)])
    candidates = Candidates(("tea", "mate", "w1", "cocoa"), "test list")
    reports = []
    for client in (cluster_client, redis_client):
        register(client, config)
        rng = np.random.default_rng(9)
        for number, start in enumerate(range(0, words.size, 100)):
            batch = oracle.perturb_keys(words[start : start + 100], rng)
            append(client, config, batch, window=WINDOW, shard=number % 3)
        assert Worker(client, batch_entries=2).run_pass().reports == words.size
        assert Worker(client).run_pass().entries == 0
        document = build_window(client, Registry(client), "answers", WINDOW, None, 0.0, candidates)
        reports.append(document["reports"])

    state = StateKey(WINDOW, config.config_id)
    for shard in range(3):
        key = state.log_key("answers", shard)
        assert cluster_client.get(key) == redis_client.get(key)
    assert reports[0] == reports[1]
    assert [item["item"] for item in reports[0][0]["items"]] == ["tea", "mate"]


def test_prune_on_the_cluster_deletes_each_shards_state_and_keeps_the_report(
    cluster_client: Any,
) -> None:
    # Six shards' states on three nodes; the report document lives in another slot.
    from ldptel.aggregator.retention import prune

    config = populate(cluster_client)
    Worker(cluster_client).run_pass()
    report = cluster_client.get(keys.report("screens", WINDOW))
    registry = Registry(cluster_client)

    found = prune(cluster_client, registry, "screens", WINDOW + 1, WINDOW + 3 * 86_400)

    assert [(o.shard, o.deleted, o.reason) for o in found] == [
        (shard, True, "deleted") for shard in range(SHARDS)
    ]
    assert states(cluster_client, config) == {}
    assert cluster_client.get(keys.report("screens", WINDOW)) == report
    simulate(cluster_client, config, np.zeros(600, dtype=np.int64), window=WINDOW, seed=12)
    late = Worker(cluster_client).run_pass()
    assert (late.reports, late.quarantined) == (0, 6)
