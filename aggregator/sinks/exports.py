"""The sinks after the store (exports such as ParquetSink), with a backlog in Redis of the
windows each still owes, so a failure is retried on a later pass and never lost.

The order for one window, under the window's build lock (aggregator/worker.py):

1. `owe`: the window joins every export's backlog (keys.export_backlog, one SADD each);
2. the store saves the document and the window's states are marked reported;
3. `deliver`: each export writes it; one that succeeds leaves the backlog (SREM), one that
   raises is logged and counted and stays in it.

A worker killed anywhere in between leaves the window pending (before 2) or owed (after),
so it is written again later: at least once, and since a sink's write replaces what it holds
for that window, exactly once in effect. A Redis error in 1 or 3 fails the pass as any Redis
error does (the store's document is never lost or doubled: step 2 is what it was without
exports). An export's failure never reaches the store: the document is saved, the window
marked reported, aggregation goes on. The worker retries the backlog after building the
pass's reports (Worker._redeliver), each owed window's current stored document loaded back
and written under the window's build lock."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ldptel.aggregator.model import WindowDocument
from ldptel.aggregator.sinks.base import WindowSink
from ldptel.store import keys
from ldptel.store.connection import RedisClient, text

log = logging.getLogger("ldptel.aggregator")


def _member(name: str, window: int) -> str:
    return f"{name}:{window}"  # a campaign name has no ":" (client/campaign.py NAME_PATTERN)


def _window(member: bytes | str) -> tuple[str, int]:
    name, window = text(member).rsplit(":", 1)
    return name, int(window)


@dataclass
class Exports:
    """The sinks after the store, and their backlogs."""

    client: RedisClient
    sinks: Sequence[WindowSink] = ()
    #: Called with a sink's name when one of its writes failed (metrics).
    on_failure: Callable[[str], None] | None = None

    def owe(self, name: str, window: int) -> None:
        """Before the store saves `window`: every export owes it."""
        if not self.sinks:
            return
        with self.client.pipeline(transaction=False) as pipe:
            for sink in self.sinks:
                pipe.sadd(keys.export_backlog(sink.name), _member(name, window))
            pipe.execute()

    def deliver(self, document: WindowDocument, sinks: Sequence[WindowSink] | None = None) -> int:
        """Write the stored `document` to each of `sinks` (default all); how many failed."""
        member = _member(document["campaign"], document["window"]["start_unix"])
        failures = 0
        for sink in self.sinks if sinks is None else sinks:
            try:
                sink.write(document)
            except Exception as error:  # any failure of an export: retried, never fatal
                failures += 1
                log.error("export %s of %s failed, retried next pass: %s: %s",
                          sink.name, member, type(error).__name__, error)  # fmt: skip
                if self.on_failure is not None:
                    self.on_failure(sink.name)
                continue
            self.client.srem(keys.export_backlog(sink.name), member)
        return failures

    def owed(self) -> dict[tuple[str, int], list[WindowSink]]:
        """(campaign, window) -> the exports that still owe it a write."""
        if not self.sinks:
            return {}
        with self.client.pipeline(transaction=False) as pipe:
            for sink in self.sinks:
                pipe.smembers(keys.export_backlog(sink.name))
            backlogs = pipe.execute()
        owed: dict[tuple[str, int], list[WindowSink]] = {}
        for sink, members in zip(self.sinks, backlogs, strict=True):
            for member in members:
                owed.setdefault(_window(member), []).append(sink)
        return dict(sorted(owed.items()))

    def forget(self, name: str, window: int, sinks: Sequence[WindowSink]) -> None:
        """Nothing stored for `window` (deleted): nothing to write."""
        for sink in sinks:
            self.client.srem(keys.export_backlog(sink.name), _member(name, window))
