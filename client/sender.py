"""The Reporter's background sender: batches the spool, posts, retries, never crashes.

One thread per process (a forked child starts its own). It sleeps until a batch is due (full,
old enough, flushed) or a retry's time comes; it is the only place that waits on the network.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ldptel.client import ledger, spool, statedb
from ldptel.client.transport import Outcome, backoff_delay

if TYPE_CHECKING:
    from ldptel.client.reporter import Reporter

LOG = logging.getLogger("ldptel.client")
#: Longest nap between looks at the spool (bounds, config refreshes, other processes' rows).
MAX_NAP = 5.0
#: After an unexpected error the loop pauses this long, then carries on.
ERROR_NAP = 1.0
#: Seconds between prunings of the ledger's past windows (ledger.KEEP_WINDOWS_SECONDS).
PRUNE_EVERY = 3600.0


class Sender(threading.Thread):
    """Runs `Reporter._send_step` until the reporter stops."""

    def __init__(self, reporter: Reporter) -> None:
        super().__init__(name="ldptel-sender", daemon=True)
        self.reporter = reporter

    def run(self) -> None:
        reporter = self.reporter
        while not reporter._stopping:
            try:
                nap = step(reporter)
                # Every round, also when nothing was sent (offline, backing off): the WAL
                # grows with every report() until it is checkpointed.
                reporter._checkpoint()
            except Exception:  # never let the thread die; the app must not notice
                LOG.exception("ldptel sender: unexpected error (will retry)")
                nap = ERROR_NAP
            if nap > 0 and not reporter._stopping:
                reporter._wake.wait(nap)
                reporter._wake.clear()


def step(reporter: Reporter) -> float:
    """One round: refresh stale configs, keep the spool bounded, send at most one batch.
    Returns how long to nap before the next round (0: go again now)."""
    settings = reporter.settings
    reporter._refresh_stale_configs()
    now = time.time()
    with reporter._lock:
        conn = reporter._conn
        if conn is None:
            return MAX_NAP
        spool.enforce_bounds(
            conn, settings.max_spool_rows, settings.max_spool_bytes, settings.max_dead_letters
        )
        if now - reporter._pruned_at >= PRUNE_EVERY:  # past windows' ledger rows
            ledger.prune(conn, now)
            reporter._pruned_at = now
        if now < reporter._hold_until:  # backing off: the collector is down or busy
            return min(MAX_NAP, reporter._hold_until - now)
        reporter._settle(conn, now)  # post reports only in the window they are charged to
        force = reporter._flushing > 0 or reporter._closed
        batch = spool.claim(conn, now, reporter._batch_limit, settings.max_batch_age, force)
        if batch is None:
            due = spool.next_due(conn, settings.max_batch_age)
            return MAX_NAP if due is None else min(MAX_NAP, max(0.01, due - now))
        reporter._posting = batch.id
    try:
        # Durable against a power loss before the collector can store it (statedb): or a
        # rebooted client could re-spend the epsilon of reports already sent, or resend them
        # under a new idempotency key.
        statedb.sync_wal(reporter.state_dir)
        outcome = reporter._transport.post_batch(
            batch.campaign, batch.config_id, batch.key, batch.reports, batch.level
        )
    except Exception:  # a bug, not the network: back off and retry the batch, same key
        LOG.exception("ldptel sender: unexpected error while posting (will retry)")
        outcome = Outcome("retry", None, "unexpected client error")
    now = time.time()
    with reporter._lock:
        reporter._posting = None
        conn = reporter._conn
        if conn is None:  # closed meanwhile: the batch stays claimed and is retried later
            return 0.0
        if outcome.verdict == "delivered":
            spool.delivered(conn, batch)
            reporter._last_error = None
            reporter._failures = 0
        elif outcome.verdict == "retry":
            # One backoff for the whole sender, not per batch: a collector that is down gets
            # one request per backoff period however many batches wait.
            delay = backoff_delay(
                reporter._failures, settings.backoff_base, settings.backoff_cap, outcome.retry_after
            )
            reporter._failures += 1
            reporter._hold_until = now + delay
            spool.retry_later(conn, batch, now + delay)
            reporter._last_error = f"HTTP {outcome.status}: {outcome.reason}"
            LOG.info(
                "ldptel: batch of %d reports not delivered (%s); retry in %.1f s",
                len(batch.reports),
                reporter._last_error,
                delay,
            )
        elif outcome.verdict == "too_large" and len(batch.reports) > 1:
            spool.dissolve(conn, batch)
            reporter._batch_limit = max(1, len(batch.reports) // 2)
        else:
            spool.dead_letter(conn, batch, outcome.status, outcome.reason, now)
            reporter._last_error = f"HTTP {outcome.status}: {outcome.reason}"
            reporter._failures = 0
            LOG.warning(
                "ldptel: collector refused %d reports of campaign %r for good (%s); "
                "kept as dead letters",
                len(batch.reports),
                batch.campaign,
                reporter._last_error,
            )
            reporter._config_refused(batch.campaign)
    reporter._notify_progress()
    return 0.0
