"""The first sink: the window document saved in Redis, where the collector serves it, the
dashboard reads it and an export's retry loads it back (store.reports)."""

from __future__ import annotations

from dataclasses import dataclass

from ldptel.aggregator.model import WindowDocument
from ldptel.aggregator.reports import store_window
from ldptel.store.connection import RedisClient


@dataclass(frozen=True)
class StoreSink:
    """Saves each document under keys.report and bumps its version (store_window)."""

    client: RedisClient
    name: str = "store"

    def write(self, document: WindowDocument) -> None:
        store_window(self.client, document)
