"""Fixtures for the TypeScript client's end-to-end tests (js_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from js_harness import Collector, build_client_js


@pytest.fixture(scope="session")
def client_js() -> Path:
    return build_client_js()


@pytest.fixture
def collector(redis_url: str, redis_client: Any) -> Iterator[Collector]:
    """A collector that answers every origin's CORS requests."""
    live = Collector(redis_url, cors_origins="*")
    yield live
    live.server.stop()
