"""Shared fixtures: a real redis-server (REDIS_URL if set, else a private one)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a real Redis: $REDIS_URL, or a private redis-server started for this session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    from ldptel.collector.redis_server import RedisServer

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
