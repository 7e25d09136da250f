"""A Redis Cluster master failing over to its replica while `ldptel collector serve` ingests
(redis+cluster://, three masters with one replica each, docs/operations.md "Replicas and
failover").

With `LDPTEL_REDIS_WAIT_REPLICAS=1` a 202 means the batch is on the master and on its
replica: after a manual failover (CLUSTER FAILOVER) and after the master is SIGKILLed and its
replica promoted, every acknowledged batch is in the stream once, clients retried the rest
under the same keys, and the aggregator counts every report once. Without WAIT, replication
is asynchronous: a batch acknowledged by a master that dies before its replica copied it is
lost, and with WAIT that same batch is answered 503 instead of a false 202.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from collector_api import Api, batch, serve
from load_clients import assert_exactly_once, send_while, setup
from served_collector import served
from waiting import wait_for

from ldptel.aggregator.worker import Worker
from ldptel.store import keys
from ldptel.store.connection import connect
from ldptel.store.redis_server import LocalCluster, RedisServer

#: A master unreachable this long is failed by the others and its replica promoted.
NODE_TIMEOUT_MS = 1000
WAIT_ONE_REPLICA = {"LDPTEL_REDIS_WAIT_REPLICAS": "1"}
#: Batches sent around each fault (a quarter before it).
PHASE_BATCHES = 120
STREAM = keys.stream("colors", 0)  # the test campaign has one shard


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(masters=3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS) as started:
        yield started


def replication(node: RedisServer) -> dict[str, Any]:
    with redis.Redis(port=node.port) as client:
        return client.info("replication")


def master_of_stream(cluster: LocalCluster) -> tuple[RedisServer, RedisServer]:
    """(master, its one replica) of the stream's slot."""
    master, (replica,) = cluster.master_of(STREAM)
    return master, replica


def is_master_with_replica(node: RedisServer) -> bool:
    try:
        info = replication(node)
    except redis.ConnectionError:
        return False
    replica = info.get("slave0")
    return info["role"] == "master" and bool(replica) and replica["state"] == "online"


def test_failovers_under_ingest_lose_and_double_nothing_with_wait(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """By hand (CLUSTER FAILOVER on the replica), then the new master SIGKILLed: its replica
    (the first master) is promoted, and the killed node restarted rejoins as its replica."""
    first, second = master_of_stream(cluster)
    with served(cluster.url, tmp_path, workers=1, env=WAIT_ONE_REPLICA) as collector:
        client = setup(collector)
        faults: list[str] = []

        def fail_over_by_hand() -> None:
            with redis.Redis(port=second.port) as replica:
                replica.cluster("FAILOVER")
            wait_for(lambda: is_master_with_replica(second), "promoted")
            faults.append("by hand")

        send_while(client, fail_over_by_hand, batches=PHASE_BATCHES, after=PHASE_BATCHES // 4)
        assert master_of_stream(cluster) == (second, first)  # the roles swapped under load

        def kill_and_rejoin() -> None:
            second.kill()
            wait_for(lambda: replication(first)["role"] == "master", "promoted")
            # Until the killed node rejoins as the new master's replica, WAIT cannot be met:
            # clients get 503 and retry, as for a down Redis.
            second.start()
            wait_for(lambda: is_master_with_replica(first), "rejoined as its replica")
            faults.append("killed")

        send_while(client, kill_and_rejoin, batches=PHASE_BATCHES, after=PHASE_BATCHES // 4)
    assert faults == ["by hand", "killed"] and client.statuses[503] > 0
    assert master_of_stream(cluster) == (first, second)
    store = connect(cluster.url)
    try:
        assert_exactly_once(client, store)
        counted = Worker(store, worker_id="after-failovers").run_pass()
        assert counted.reports == sum(client.acknowledged.values())
        assert Worker(store, worker_id="again").run_pass().entries == 0  # counted once
    finally:
        store.close()


def fill_replication_buffer(master: RedisServer) -> None:
    """Write to the master more than the kernel can buffer between it and its (stopped)
    replica: the rest waits in the master's memory (the replica link's `omem`), and so does
    every later write, which therefore is certainly not on the replica yet."""
    kernel_bytes = sum(
        int(Path(f"/proc/sys/net/ipv4/tcp_{buffer}").read_text().split()[2])  # the maximum
        for buffer in ("rmem", "wmem")
    )
    chunk = b"x" * 1_000_000
    with redis.Redis(port=master.port) as client:
        for i in range(kernel_bytes // len(chunk) + 2):
            client.set(f"filler:{{colors:0}}:{i}", chunk)
        (link,) = client.client_list(_type="replica")
        assert int(link["omem"]) > 0


def test_without_wait_an_acknowledged_batch_can_be_lost_and_with_wait_it_is_refused(
    cluster: LocalCluster,
) -> None:
    master, replica = master_of_stream(cluster)
    plain = serve({"redis_url": cluster.url})
    waiting = serve(
        {"redis_url": cluster.url, "redis_wait_replicas": 1, "redis_wait_timeout_seconds": 0.2}
    )
    try:
        lose_an_acknowledged_batch(master, replica, Api(plain.url), Api(waiting.url))
    finally:
        plain.stop()
        waiting.stop()


def lose_an_acknowledged_batch(
    master: RedisServer, replica: RedisServer, api: Api, api_wait: Api
) -> None:
    config_id, token = api.create_campaign(), api.create_token()
    wait_for(lambda: copied(master), "the registry copied to the replica")
    replica.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        fill_replication_buffer(master)
        refused = api_wait.post_reports(token, batch(config_id, [1, 2]), key="refused")
        acknowledged = api.post_reports(token, batch(config_id, [3]), key="acknowledged")
        master.kill()
    finally:
        replica.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["field"] == "redis"
    assert acknowledged.status_code == 202
    with redis.Redis(port=replica.port) as promoted:
        promoted.cluster("FAILOVER", "TAKEOVER")
        wait_for(lambda: replication(replica)["role"] == "master", "promoted")
        # Asynchronous replication: the acknowledged batch died with its master.
        assert promoted.xlen(STREAM) == 0
        assert not promoted.exists(keys.idempotency("colors", 0, "acknowledged"))
    master.start()  # it rejoins as the new master's replica, so WAIT can be met again
    wait_for(lambda: is_master_with_replica(replica), "rejoined as its replica")
    # Retried under its key as a client does: a 503 while the rejoined replica still syncs
    # (WAIT times out) changes nothing; the first 202 stores it, and only once.
    answers: list[Any] = []

    def retry() -> bool:
        answers.append(api_wait.post_reports(token, batch(config_id, [1, 2]), key="refused"))
        return bool(answers[-1].status_code != 503)

    wait_for(retry, "the retried batch acknowledged")
    retried = answers[-1]
    assert retried.status_code == 202 and retried.json() == {"accepted": 2, "duplicate": False}
    again = api_wait.post_reports(token, batch(config_id, [1, 2]), key="refused")
    assert again.json() == {"accepted": 2, "duplicate": True}


def copied(master: RedisServer) -> bool:
    """The master's replica has every write so far (offsets equal)."""
    info = replication(master)
    return bool(info["master_repl_offset"] == info["slave0"]["offset"])
