"""Redis clients from a URL, for the collector, the aggregator and the CLI alike
(docs/collector.md, "Redis Cluster").

- `redis://`, `rediss://`, `unix://`: one Redis server (`redis.Redis`).
- `redis+cluster://[user:password@]host:port[,host:port...][?options]` (`rediss+cluster://`
  for TLS): a Redis Cluster (`redis.cluster.RedisCluster`); the hosts are startup nodes, the
  client learns the rest of the cluster from any one of them.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import AskError, RedisClusterException, TryAgainError

from ldptel.client.errors import ParameterError

#: Cluster scheme -> the scheme of one node's URL.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
#: What a failing Redis raises: redis-py's cluster client also raises RedisClusterException,
#: which is not a RedisError (e.g. no startup node answers).
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
#: A slot moved or is moving (resharding, failover): the command was not run (MovedError is
#: an AskError; TRYAGAIN answers multi-key commands during a migration).
SLOT_MOVED_ERRORS: tuple[type[Exception], ...] = (AskError, TryAgainError)
#: What a node answers while its slot fails over: moved, or the node gone.
FAILOVER_ERRORS: tuple[type[Exception], ...] = (
    *SLOT_MOVED_ERRORS,
    redis.ConnectionError,
    redis.TimeoutError,
)

#: What `connect` returns: one server's client or a cluster's; both speak the commands the
#: store uses (keys of one operation share a hash tag, so a cluster runs them on one node).
RedisClient: TypeAlias = "redis.Redis | RedisCluster"


def text(value: bytes | str) -> str:
    """A reply as text: the store's clients return bytes (decode_responses is never set),
    but redis-py types replies as bytes | str."""
    return value.decode() if isinstance(value, bytes) else value


def data(value: bytes | str) -> bytes:
    """A reply as bytes (see `text`)."""
    return value if isinstance(value, bytes) else value.encode()


_CLUSTER_URL = re.compile(r"^(?:(?P<userinfo>[^@/?#]*)@)?(?P<hosts>[^/?#]+)(?P<rest>[/?].*)?$")


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def connect(url: str, **options: Any) -> RedisClient:
    """A client for `url` (see the module docstring); `options` go to the client (timeouts;
    `retry` is the cluster client's own retry policy for a cluster URL)."""
    if not is_cluster_url(url):
        return redis.Redis.from_url(url, **options)
    scheme, _, remainder = url.partition("://")
    match = _CLUSTER_URL.match(remainder)
    if match is None:
        raise ParameterError("redis_url", "must be redis+cluster://host:port[,host:port...]")
    rest = match["rest"] or ""
    if rest.partition("?")[0].strip("/") not in ("", "0"):
        raise ParameterError("redis_url", "a Redis Cluster has one database: use /0 or none")
    nodes = [_node(text) for text in match["hosts"].split(",")]
    userinfo = f"{match['userinfo']}@" if match["userinfo"] is not None else ""
    host, port = nodes[0]
    host = f"[{host}]" if ":" in host else host  # IPv6
    first = f"{CLUSTER_SCHEMES[scheme.lower()]}://{userinfo}{host}:{port}"
    # The first node's URL carries the credentials and options for every node.
    return RedisCluster(
        url=first + rest,
        startup_nodes=[ClusterNode(h, p) for h, p in nodes[1:]],  # type: ignore[no-untyped-call]
        **options,
    )


def _node(text: str) -> tuple[str, int]:
    try:
        parts = urlsplit(f"//{text.strip()}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host:
        raise ParameterError("redis_url", f"cluster node {text!r} must be host:port")
    return host, port or 6379


def node_client(client: RedisClient, key: str) -> redis.Redis:
    """The client for a WATCH/MULTI/EXEC transaction on `key`'s slot: for a cluster, a plain
    client on the node that owns the slot; else `client` itself.

    Not redis-py's ClusterPipeline: after a connection error its transaction re-sends
    MULTI/EXEC on a new connection without the WATCH, so an EXEC whose reply was lost could
    apply twice. A plain client's pipeline raises WatchError instead (nothing re-sent).
    """
    if isinstance(client, RedisCluster):
        return client.get_redis_connection(client.get_node_from_key(key))  # type: ignore[no-untyped-call]
    return client


def refresh_slots(client: RedisClient) -> None:
    """Re-read a cluster's slot map (after MOVED/ASK); nothing to do for one server."""
    if isinstance(client, RedisCluster):
        client.nodes_manager.initialize()
