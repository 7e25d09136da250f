"""Every test here is marked `reliability` (run by default, in CI too)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.reliability)
