"""The aggregator worker: drains every campaign's shards it can lease, then rebuilds the
reports of the windows it touched; once, or on a schedule until told to stop.

Several workers may run side by side: each shard is read by the holder of its lease, and the
others skip it. Stopping (SIGTERM/SIGINT -> `stop()`) lets the current transaction finish.

Each report built goes to the worker's sinks (aggregator/sinks/): the store first, then the
exports, whose failures are retried on later passes (sinks/exports.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ldptel.aggregator.lease import Lease
from ldptel.aggregator.model import WindowDocument
from ldptel.aggregator.reports import ReportOptions, build_window, list_windows, load_window
from ldptel.aggregator.shard import ShardStep, StepResult
from ldptel.aggregator.sinks import Exports, StoreSink, WindowSink
from ldptel.aggregator.state import StateKey, pending_states, pending_windows, reported
from ldptel.store import keys
from ldptel.store.connection import REDIS_ERRORS, RedisClient, text
from ldptel.store.registry import Registry

if TYPE_CHECKING:  # prometheus_client is imported only by a worker that serves metrics
    from ldptel.aggregator.metrics import AggregatorMetrics

log = logging.getLogger("ldptel.aggregator")

#: TTL of a window's report build lock: far above a build's milliseconds, so it lapses only
#: if its holder died (then the window waits at most this long for another worker).
REPORT_LOCK_MS = 30_000


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class PassStats:
    """Totals of one pass over all shards."""

    entries: int = 0
    reports: int = 0
    quarantined: int = 0
    shards: int = 0
    idle_shards: int = 0
    skipped_shards: int = 0
    touched: dict[str, set[StateKey]] = field(default_factory=lambda: defaultdict(set))
    reports_built: int = 0
    #: Writes of the exports (the sinks after the store) that failed, and owed windows
    #: written from the backlog of an earlier pass.
    export_failures: int = 0
    exports_redelivered: int = 0


def _stream_id(value: bytes | str) -> tuple[int, int]:
    """A stream id as the (ms, seq) pair it is ordered by."""
    ms, seq = text(value).split("-")
    return int(ms), int(seq)


def trim_threshold(checkpoint: bytes | str, now_ms: int, retention_seconds: int) -> str:
    """The XTRIM MINID threshold: below the checkpoint (already counted) AND older than the
    retention; stream ids are Redis-clock milliseconds, compared as (ms, seq) pairs."""
    ms, seq = (int(part) for part in text(checkpoint).split("-"))
    cutoff = now_ms - retention_seconds * 1000
    return f"{ms}-{seq}" if ms < cutoff else f"{max(cutoff, 0)}-0"


class Worker:
    """Aggregates shards whose lease it holds (see the module docstring)."""

    def __init__(
        self,
        client: RedisClient,
        *,
        worker_id: str | None = None,
        batch_entries: int = 1000,
        lease_ms: int = 30_000,
        report_options: ReportOptions | None = None,
        build_reports: bool = True,
        on_step: Callable[[StepResult], None] | None = None,
        metrics: AggregatorMetrics | None = None,
        exports: Sequence[WindowSink] = (),
    ) -> None:
        self.client = client
        self.registry = Registry(client)
        self.worker_id = worker_id or default_worker_id()
        self.batch_entries = batch_entries
        self.lease_ms = lease_ms
        self.report_options = report_options or ReportOptions()
        self.build_reports = build_reports
        self.on_step = on_step
        self.metrics = metrics
        self.store = StoreSink(client)
        self.exports = Exports(client, exports, self._export_failed)
        self._stop = threading.Event()

    @property
    def sinks(self) -> list[WindowSink]:
        """Where each report built goes, in order: the store, then the exports."""
        return [self.store, *self.exports.sinks]

    def _export_failed(self, sink: str) -> None:
        if self.metrics is not None:
            self.metrics.export_failed(sink)

    def stop(self) -> None:
        """Finish the current transaction, then return from `run_pass` / `run_forever`."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run_forever(self, every: float) -> None:
        """A pass every `every` seconds (measured start to start) until `stop()`. A pass that
        Redis fails (restart, failover, timeout) is logged and retried at the next one: it
        applied whole steps or nothing, so the retry neither loses nor doubles reports."""
        while not self.stopping:
            started = time.monotonic()
            try:
                stats = self.run_pass()
                if self.metrics is not None:
                    self.metrics.passed(time.monotonic() - started, stats)
                    self.metrics.measure_lag(self.client, self.registry)
                    self.metrics.measure_alerts(self.client, self.registry)
            except REDIS_ERRORS as error:
                log.error("pass failed, retrying in %.0f s: %s: %s", every,
                          type(error).__name__, error)  # fmt: skip
                if self.metrics is not None:
                    self.metrics.failed()
            self._stop.wait(max(0.0, every - (time.monotonic() - started)))

    def run_pass(self) -> PassStats:
        """Drain every shard this worker can lease, then rebuild touched windows' reports.

        Which shards have entries after their checkpoint is read for all campaigns in one
        pipeline; an idle shard costs no lease, no step and no round trip of its own."""
        stats = PassStats()
        shard_counts = self.registry.shard_counts(self.registry.names())
        for name, shard in self._shards_with_entries(shard_counts, stats):
            if self.stopping:
                break
            self._drain(name, shard, stats)
        if self.build_reports:
            built = self._build_reports(stats, shard_counts)
            self._redeliver(stats, built)
        log.info(
            "pass done: %d entries, %d reports, %d quarantined, %d shards (%d idle, %d leased "
            "by others), %d reports built, %d export failures",
            stats.entries, stats.reports, stats.quarantined, stats.shards, stats.idle_shards,
            stats.skipped_shards, stats.reports_built, stats.export_failures,
        )  # fmt: skip
        return stats

    def _shards_with_entries(
        self, shard_counts: dict[str, int], stats: PassStats
    ) -> list[tuple[str, int]]:
        """The shards whose stream has an entry after the checkpoint; the others are idle,
        trimmed here when their oldest entry is past the retention (all in two pipelines)."""
        shards = [(name, shard) for name, count in shard_counts.items() for shard in range(count)]
        with self.client.pipeline(transaction=False) as pipe:
            for name, shard in shards:
                pipe.get(keys.checkpoint(name, shard))
                pipe.xrange(keys.stream(name, shard), count=1)
                pipe.xrevrange(keys.stream(name, shard), count=1)
            replies = pipe.execute()
        busy, trims = [], []
        for at, (name, shard) in enumerate(shards):
            checkpoint, first, last = replies[3 * at : 3 * at + 3]
            if last and (checkpoint is None or _stream_id(last[0][0]) > _stream_id(checkpoint)):
                busy.append((name, shard))
                continue
            stats.idle_shards += 1
            if (
                first
                and checkpoint is not None
                and _stream_id(first[0][0]) < _stream_id(checkpoint)
            ):
                trims.append((name, shard, checkpoint, _stream_id(first[0][0])))
        if trims:
            self._trim_idle(trims)
        return busy

    def _trim_idle(self, trims: list[tuple[str, int, bytes, tuple[int, int]]]) -> None:
        seconds, micros = self.client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        with self.client.pipeline(transaction=False) as pipe:
            for name, shard, checkpoint, first in trims:
                config = self.registry.current_config(name, fresh=False)
                if config is None:
                    continue
                threshold = trim_threshold(checkpoint, now_ms, config.retention_seconds)
                if first < _stream_id(threshold):  # only then is there anything to remove
                    pipe.xtrim(keys.stream(name, shard), minid=threshold, approximate=False)
            pipe.execute()

    def _drain(self, name: str, shard: int, stats: PassStats) -> None:
        lease = Lease(self.client, keys.lease(name, shard), self.worker_id, self.lease_ms)
        if not lease.acquire():
            stats.skipped_shards += 1
            return
        stats.shards += 1
        step = ShardStep(self.client, self.registry, name, shard)
        try:
            while not self.stopping and lease.keep():
                result = step.run(lease.token, self.batch_entries)
                stats.entries += result.entries
                stats.reports += result.reports
                stats.quarantined += result.quarantined
                stats.touched[name] |= result.touched
                if self.on_step is not None:
                    self.on_step(result)
                if self.metrics is not None:
                    self.metrics.progress()
                if result.quarantined:
                    log.warning(
                        "%s shard %d: %d entries quarantined", name, shard, result.quarantined
                    )
                if result.lost:
                    log.warning("%s shard %d: lease lost to another worker", name, shard)
                    return
                if result.caught_up:
                    self._trim(name, shard)
                    return
        finally:
            lease.release()

    def _trim(self, name: str, shard: int) -> None:
        checkpoint = self.client.get(keys.checkpoint(name, shard))
        config = self.registry.current_config(name)
        if checkpoint is None or config is None:
            return
        seconds, micros = self.client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        threshold = trim_threshold(checkpoint, now_ms, config.retention_seconds)
        # MINID removes ids < threshold only, and the threshold never exceeds the checkpoint.
        self.client.xtrim(keys.stream(name, shard), minid=threshold, approximate=False)

    def _build_reports(
        self, stats: PassStats, shard_counts: dict[str, int]
    ) -> set[tuple[str, int]]:
        """Rebuild the report of every window with state newer than its stored report
        (including windows a killed worker applied but never reported); the windows built."""
        built: set[tuple[str, int]] = set()
        for name, windows in pending_windows(self.client, shard_counts).items():
            for window in sorted(windows):
                if self.stopping:
                    return built
                if self._build_report(name, range(shard_counts[name]), window, stats):
                    built.add((name, window))
        stats.reports_built += len(built)
        return built

    def rebuild(self, name: str) -> PassStats:
        """Rebuild the report of every window of `name` that still has state (its candidate
        list changed) and hand each to the sinks, as a pass does; a window another worker is
        building is left to it. Its `reports_built` counts the windows rebuilt."""
        stats = PassStats()
        shards = range(self.registry.shard_count(name))
        for window in list_windows(self.client, self.registry, name):
            stats.reports_built += self._build_report(name, shards, window, stats)
        return stats

    def _window_lock(self, name: str, window: int) -> Lease:
        # A lease like a shard's: a restarted worker with the same id takes it back at once.
        return Lease(self.client, keys.report_lock(name, window), self.worker_id, REPORT_LOCK_MS)

    def _build_report(self, name: str, shards: range, window: int, stats: PassStats) -> bool:
        """Build one window's report under the window's build lock and hand it to the sinks
        (sinks/exports.py: owed, stored, marked done, exported); False if another worker
        holds the lock (the window stays pending for a later pass)."""
        lock = self._window_lock(name, window)
        if not lock.acquire():
            return False
        try:
            # Read under the lock: a delta applied after this read keeps the window pending.
            pending = pending_states(self.client, name, shards)
            document = build_window(self.client, self.registry, name, window, self.report_options)
            self.exports.owe(name, window)
            self.store.write(document)
            reported(self.client, name, pending, window)
            stats.export_failures += self.exports.deliver(document)
            return True
        finally:
            lock.release()

    def _stored(self, name: str, window: int) -> WindowDocument | None:
        """The stored document of an owed window; None if there is none, or if it no longer
        reads as a document (stored by another version: logged, the window is not owed, and
        its next rebuild is exported)."""
        try:
            return load_window(self.client, name, window)
        except ValueError as error:  # DocumentError, or not JSON
            log.error("export of %s:%d dropped: its stored report cannot be read: %s",
                      name, window, error)  # fmt: skip
            return None

    def _redeliver(self, stats: PassStats, built: set[tuple[str, int]]) -> None:
        """Write every window an export still owes (a failure or a crash of an earlier pass)
        from its stored document, under the window's build lock (a window locked by another
        worker stays owed). Windows built in this pass were just delivered."""
        for (name, window), sinks in self.exports.owed().items():
            if self.stopping:
                return
            if (name, window) in built:
                continue
            lock = self._window_lock(name, window)
            if not lock.acquire():
                continue
            try:
                document = self._stored(name, window)
                if document is None:
                    self.exports.forget(name, window, sinks)
                    continue
                failures = self.exports.deliver(document, sinks)
                stats.export_failures += failures
                stats.exports_redelivered += len(sinks) - failures
            finally:
                lock.release()
