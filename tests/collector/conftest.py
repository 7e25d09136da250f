"""Fixtures: a collector over real HTTP on a flushed real Redis, whose every answer is checked
against openapi.yaml (schemathesis response conformance), so drift between the code and the
document fails the test that saw it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from collector_api import Api, serve
from openapi_conformance import conforms


@pytest.fixture
def api(redis_url: str, redis_client: Any) -> Iterator[Api]:
    """A collector on a flushed Redis, without a rate limit; its answers must conform."""
    server = serve({"redis_url": redis_url})
    client = Api(server.url)
    client.session.hooks["response"].append(conforms)
    yield client
    server.stop()


@pytest.fixture
def campaign(api: Api) -> tuple[str, str]:
    """(config_id, ingest token) of the 'colors' DE campaign."""
    return api.create_campaign(), api.create_token()
