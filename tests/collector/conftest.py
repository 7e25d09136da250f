"""Fixtures: a collector over real HTTP on a flushed real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from collector_api import Api, serve


@pytest.fixture
def api(redis_url: str, redis_client: Any) -> Iterator[Api]:
    """A collector on a flushed Redis, without a rate limit."""
    server = serve({"redis_url": redis_url})
    yield Api(server.url)
    server.stop()


@pytest.fixture
def campaign(api: Api) -> tuple[str, str]:
    """(config_id, ingest token) of the 'colors' DE campaign."""
    return api.create_campaign(), api.create_token()
