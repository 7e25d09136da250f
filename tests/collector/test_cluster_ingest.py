"""The collector on a real Redis Cluster (three masters on loopback) over real HTTP: a
campaign's shards live on different nodes, each shard's stream, idempotency marks and rate
counters on the one node that owns its slot, and a retried batch is stored once."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from collector_api import Api, ServerThread, batch, campaign_config, collector_app

from ldptel.client.errors import ParameterError
from ldptel.collector.ingest import shard_of
from ldptel.store import keys
from ldptel.store.connection import REDIS_ERRORS, connect, is_cluster_url
from ldptel.store.redis_server import free_port

SHARDS = 6
BATCHES = 24


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis+cluster://", "must be redis+cluster://host:port"),
        ("redis+cluster://127.0.0.1:7000,127.0.0.1:x", "cluster node '127.0.0.1:x'"),
        ("redis+cluster://127.0.0.1:7000/1", "one database"),
    ],
)
def test_a_malformed_cluster_url_names_the_setting(url: str, reason: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(reason)) as error:
        connect(url)
    assert error.value.field == "redis_url"


def test_url_schemes_choose_the_client() -> None:
    assert is_cluster_url("redis+cluster://a:1,b:2") and is_cluster_url("REDISS+CLUSTER://a:1")
    assert not is_cluster_url("redis://a:1/0") and not is_cluster_url("unix:///tmp/r.sock")
    assert type(connect("redis://127.0.0.1:1/0")) is redis.Redis  # lazy: no connection yet


def test_an_unreachable_cluster_raises_a_redis_error() -> None:
    # RedisCluster connects at once; its error is not a RedisError, so callers catch these.
    with pytest.raises(REDIS_ERRORS):
        connect(f"redis+cluster://127.0.0.1:{free_port()}")


@pytest.fixture
def cluster_api(redis_cluster_url: str, cluster_client: Any) -> Iterator[Api]:
    """A collector on the flushed cluster, with a rate limit (so rate counters are kept)."""
    server = ServerThread(collector_app({"redis_url": redis_cluster_url, "rate_limit": 10_000}))
    yield Api(server.url)
    server.stop()


def node_of(cluster: Any, key: str) -> Any:
    """A plain client on the node that owns `key`'s slot: it answers MOVED for other keys,
    so reading a key through it proves where the key lives."""
    return cluster.get_redis_connection(cluster.get_node_from_key(key))


@pytest.mark.slow
def test_shards_spread_over_the_nodes_and_a_retry_is_stored_once(
    cluster_api: Api, cluster_client: Any
) -> None:
    config_id = cluster_api.create_campaign(campaign_config(shards=SHARDS))
    token = cluster_api.create_token()
    sent = {f"batch-{i:02d}": [i % 5, (i + 1) % 5, (i + 2) % 5] for i in range(BATCHES)}
    for key, values in sent.items():
        response = cluster_api.post_reports(token, batch(config_id, values), key=key)
        assert response.status_code == 202, response.text
        assert response.json() == {"accepted": 3, "duplicate": False}
    retry = cluster_api.post_reports(token, batch(config_id, sent["batch-07"]), key="batch-07")
    assert retry.status_code == 202
    assert retry.json() == {"accepted": 3, "duplicate": True}

    per_shard = Counter(shard_of(key, SHARDS) for key in sent)
    nodes = {cluster_client.get_node_from_key(keys.stream("colors", s)).name for s in per_shard}
    assert len(nodes) == 3, "the campaign's shards should live on all three masters"
    for shard, count in per_shard.items():
        node = node_of(cluster_client, keys.stream("colors", shard))
        assert node.xlen(keys.stream("colors", shard)) == count  # the retry added nothing
        for key in (k for k in sent if shard_of(k, SHARDS) == shard):
            assert node.get(keys.idempotency("colors", shard, key)).startswith(b"3:")  # n:digest
        rate_counters = list(node.scan_iter(match=keys.rate("colors", shard, "*", 0)[:-1] + "*"))
        assert rate_counters, "the rate counter lives in the shard's slot"
    stored = [
        int(fields[b"n"])
        for shard in range(SHARDS)
        for _, fields in cluster_client.xrange(keys.stream("colors", shard))
    ]
    assert stored == [3] * BATCHES


@pytest.mark.slow
def test_registry_tokens_and_readiness_work_on_the_cluster(cluster_api: Api) -> None:
    config_id = cluster_api.create_campaign(campaign_config(shards=SHARDS))
    token = cluster_api.create_token()
    session, url = cluster_api.session, cluster_api.url
    assert session.get(f"{url}/readyz").status_code == 200
    fetched = session.get(f"{url}/v1/campaigns/colors")
    assert fetched.status_code == 200 and fetched.headers["ETag"] == f'"{config_id}"'
    retired = session.post(f"{url}/v1/campaigns/colors/retire", headers=cluster_api.admin())
    assert retired.status_code == 200
    rejected = cluster_api.post_reports(token, batch(config_id, [1]))
    assert rejected.status_code == 409 and rejected.json()["error"]["field"] == "campaign"
