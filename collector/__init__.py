"""ldptel collector: the Flask service that receives randomized reports.

`create_app` and `CollectorConfig` load on first use, so `ldptel.store.keys` and
`ldptel.store.redis_server` stay importable without Flask (the aggregator uses them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ldptel.collector.app import create_app
    from ldptel.collector.settings import CollectorConfig

__all__ = ["CollectorConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ldptel.collector.app import create_app

        return create_app
    if name == "CollectorConfig":
        from ldptel.collector.settings import CollectorConfig

        return CollectorConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
