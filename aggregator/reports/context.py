"""What every report builder is given: one object for the window being built, instead of
the client, registry, options and clock threaded through each function."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.reports.options import Candidates, ReportOptions
from ldptel.aggregator.state import LogView, StateKey, read_log, read_state
from ldptel.client.oracles.base import ReportMechanism
from ldptel.store import candidates as stored_candidates
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry

M = TypeVar("M", bound=ReportMechanism)


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

    def dictionary(self) -> Candidates:
        """The candidates an open-domain report estimates: those given for this build
        (`ldptel report --candidates`), else the campaign's stored list
        (store/candidates.py), else none."""
        if self.candidates is not None:
            return self.candidates
        stored = stored_candidates.load(self.client, self.name)
        if stored is None:
            return Candidates()
        return Candidates(stored.values, stored.source)

    @property
    def shards(self) -> range:
        return range(self.registry.shard_count(self.name))

    def read(self, state: StateKey, support_size: int) -> tuple[int, NDArray[np.int64]]:
        """A state's n and support vector, merged over the campaign's shards."""
        return read_state(self.client, self.name, self.shards, state, support_size)

    def read_log(self, state: StateKey, record_size: int) -> LogView:
        """A report-log state (open-domain OLH), merged over the campaign's shards."""
        return read_log(self.client, self.name, self.shards, state, record_size)

    def counted(
        self, states: Sequence[StateKey], kind: type[M]
    ) -> Iterator[tuple[StateKey, M, int, NDArray[np.int64]]]:
        """Each state whose registry mechanism is a `kind`, with it and its merged n and
        support; other states are skipped (never written: the worker quarantines entries it
        cannot interpret)."""
        for state in states:
            mechanism = self.registry.oracle(state.config_id, state.level)
            if isinstance(mechanism, kind):
                n, support = self.read(state, mechanism.support_size)
                yield state, mechanism, n, support
