"""Sinks: where the aggregator worker hands each window document it built.

The first sink is the store (`StoreSink`, Redis: what the collector serves and the dashboard
reads), then the exports (`ParquetSink`), each a `WindowSink`. The store's failure fails the
build (the window stays pending, rebuilt next pass); an export's is logged, counted and
retried on later passes from a backlog in Redis (exports.py), never stopping aggregation.
"""

from ldptel.aggregator.sinks.base import WindowSink
from ldptel.aggregator.sinks.exports import Exports
from ldptel.aggregator.sinks.parquet import ParquetSink
from ldptel.aggregator.sinks.store import StoreSink

__all__ = ["Exports", "ParquetSink", "StoreSink", "WindowSink"]
