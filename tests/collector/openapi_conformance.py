"""openapi.yaml as the collector tests check every answer against it (schemathesis response
conformance). A module of its own name: `from conftest import` would find another folder's."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import schemathesis

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
