"""What every report builder is given: one object for the window being built, instead of
the client, registry, options and clock threaded through each function."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.reports.options import Candidates, ReportOptions
from ldptel.aggregator.state import LogView, StateKey, read_log, read_state
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry


@dataclass(frozen=True)
class ReportContext:
    """One window of one campaign being reported: where its state is and how to report it."""

    client: RedisClient
    registry: Registry
    name: str
    window: int
    options: ReportOptions
    built_at: float
    candidates: Candidates | None = None

    @property
    def shards(self) -> range:
        return range(self.registry.shard_count(self.name))

    def read(self, state: StateKey, support_size: int) -> tuple[int, NDArray[np.int64]]:
        """A state's n and support vector, merged over the campaign's shards."""
        return read_state(self.client, self.name, self.shards, state, support_size)

    def read_log(self, state: StateKey, record_size: int) -> LogView:
        """A report-log state (open-domain OLH), merged over the campaign's shards."""
        return read_log(self.client, self.name, self.shards, state, record_size)
