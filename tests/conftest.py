"""Shared fixtures: a real redis-server (REDIS_URL if set, else a private one) and a real
Redis Cluster (REDIS_CLUSTER_URL if set, else three private masters with a replica each)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

# No per-example deadline: Hypothesis's default (200 ms) is a timed assertion, and on a loaded
# machine a preempted example overruns it ("Unreliable test timings") while the code is right.
settings.register_profile("ldptel", deadline=None)
settings.load_profile("ldptel")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a real Redis: $REDIS_URL, or a private redis-server started for this session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    from ldptel.store.redis_server import RedisServer

    with RedisServer(appendonly=False) as server:
        yield server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[object]:
    """A client on a flushed database, flushed again after the test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """URL of a real Redis Cluster: $REDIS_CLUSTER_URL, or three masters with a replica each
    on loopback, started for this session (redis+cluster://, store/connection.py)."""
    if os.environ.get("REDIS_CLUSTER_URL"):
        yield os.environ["REDIS_CLUSTER_URL"]
        return
    from ldptel.store.redis_server import LocalCluster

    with LocalCluster(masters=3, replicas=1) as cluster:
        yield cluster.url


@pytest.fixture
def cluster_client(redis_cluster_url: str) -> Iterator[Any]:
    """A cluster client on a flushed cluster (every master), flushed again after the test."""
    from ldptel.store.connection import connect

    client = connect(redis_cluster_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def site() -> Iterator[Any]:
    """The dashboard tests' site: Redis filled by `ldptel demo` over several windows, with the
    collector and the dashboard served over it (tests/dashboard_site.py)."""
    from dashboard_site import serve_site

    yield from serve_site()
