"""Fixtures of the aggregator tests: a second database of the same server for reference runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from stream_entries import with_db


@pytest.fixture
def reference_client(redis_url: str) -> Iterator[Any]:
    """A flushed client on database 1 (the tests' main database is 0)."""
    import redis

    client = redis.Redis.from_url(with_db(redis_url, 1))
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
