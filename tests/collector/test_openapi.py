"""openapi.yaml is a valid OpenAPI 3 document (openapi-spec-validator), and the response
check every API test runs (conftest.conforms) fails on drift."""

from __future__ import annotations

import io
from typing import Any

import pytest
import requests
import urllib3
from openapi_conformance import OPENAPI, conforms
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename
from schemathesis.core.failures import FailureGroup


def test_the_document_is_valid_openapi() -> None:
    document, _ = read_from_filename(str(OPENAPI))
    validate(document)


def answer(method: str, path: str, status: int, body: bytes) -> requests.Response:
    """A response to `method path` as the API tests' hook sees it."""
    headers = {"Content-Type": "text/html" if body.startswith(b"<") else "application/json"}
    response = requests.Response()
    response.status_code = status
    response._content = body
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers, status=status)
    response.headers.update(headers)
    response.request = requests.Request(method, f"http://127.0.0.1{path}").prepare()
    return response


CONFIG = (
    b'{"name":"colors","oracle":"de","epsilon":1.0,"domain":["a","b"],'
    b'"config_id":"0123456789abcdef"}'
)


def test_a_documented_answer_passes() -> None:
    conforms(answer("GET", "/v1/campaigns/colors", 200, CONFIG))
    conforms(answer("POST", "/v1/reports", 422, b'{"error":{"field":"f","reason":"r"}}'))


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        ("GET", "/v1/campaigns/colors", 200, CONFIG.replace(b"}", b',"extra":1}')),  # field
        ("GET", "/v1/campaigns/colors", 200, CONFIG.replace(b',"config_id"', b',"id"')),
        ("POST", "/v1/reports", 202, b'{"accepted":"3","duplicate":false}'),  # a wrong type
        ("POST", "/v1/reports", 418, b'{"error":{"field":"f","reason":"r"}}'),  # undocumented
        ("GET", "/nowhere", 404, b"<html>not found</html>"),  # not JSON
    ],
)  # fmt: skip
def test_drift_from_the_document_fails(method: str, path: str, status: int, body: Any) -> None:
    # One schemathesis failure is an AssertionError; several come as a FailureGroup.
    with pytest.raises((AssertionError, FailureGroup)):
        conforms(answer(method, path, status, body))
