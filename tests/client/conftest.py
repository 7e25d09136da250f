"""Fixtures for the Reporter tests: a live collector on a flushed real Redis, a state dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_collector import LiveCollector
from reporter_settings import FAST


@pytest.fixture
def collector(redis_url: str, redis_client: Any) -> Iterator[LiveCollector]:
    live = LiveCollector(redis_url)
    yield live
    live.stop()


@pytest.fixture
def token(collector: LiveCollector) -> str:
    return collector.api.create_token()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def open_reporter(collector: LiveCollector, token: str, state_dir: Path) -> Iterator[Any]:
    """Open Reporters on the live collector (closed at teardown): open_reporter(**settings)."""
    from ldptel.client import Reporter

    opened: list[Reporter] = []

    def open_one(**settings: Any) -> Reporter:
        reporter = Reporter(
            collector.url,
            token,
            state_dir=settings.pop("state_dir", state_dir),
            **{**FAST, **settings},
        )
        opened.append(reporter)
        return reporter

    yield open_one
    for reporter in opened:
        reporter.close(timeout=0)
