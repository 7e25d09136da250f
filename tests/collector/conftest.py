"""Fixtures: a collector over real HTTP on a flushed real Redis, whose every answer is checked
against openapi.yaml (schemathesis response conformance), so drift between the code and the
document fails the test that saw it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import schemathesis
from collector_api import Api, serve

OPENAPI = Path(__file__).parents[2] / "collector" / "openapi.yaml"
SCHEMA = schemathesis.openapi.from_path(OPENAPI)
ERROR_SCHEMA = SCHEMA.raw_schema["components"]["schemas"]["Error"]


def conforms(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """A requests response hook: the answer is documented for its operation and matches its
    schema; an answer to a path the document does not have is a JSON error."""
    request = response.request
    path = urlsplit(str(request.url)).path
    operation = SCHEMA.find_operation_by_path(str(request.method), path)
    if operation is None:
        import jsonschema

        assert response.status_code in (404, 405), f"{request.method} {path} is undocumented"
        assert response.headers.get("Content-Type") == "application/json", response.text
        jsonschema.validate(response.json(), ERROR_SCHEMA)
        return
    documented = operation.definition.raw["responses"]
    assert str(response.status_code) in documented, (
        f"{request.method} {path} answered {response.status_code}, not in openapi.yaml"
    )
    operation.validate_response(response)


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
