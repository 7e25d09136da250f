"""The Reporter's delivery: batches the spool, posts, retries, never crashes.

`Sender` owns every piece of delivery state (the batch being posted, backoff, the batch size
the collector accepts, the last error, flush waiters, checkpoints, the disk-full reserve) and
its thread: one per process (a forked child starts its own). The Reporter talks to it through
`spooled`/`wake` (after a report), `accepting`/`disk_full` (before and on a write), `flush`,
`stop`, `last_error` and the fork hooks; the Sender reaches the state database only through the
Reporter's lock and connection (client/state.py), and the campaigns and the collector's windows
through three callbacks (client/config_cache.py, client/windows.py).

The thread sleeps until a batch is due (full, old enough, flushed) or a retry's time comes; it
is the only place that waits on the network.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ldptel.client import spool, statedb
from ldptel.client.errors import (
    DeliveryError,
    DiskFullError,
    ReportsRefusedError,
    TokenRefusedError,
)
from ldptel.client.settings import Settings
from ldptel.client.status import as_ldptel_error
from ldptel.client.transport import Outcome, Transport, Verdict, backoff_delay

LOG = logging.getLogger("ldptel.client")
#: Longest nap between looks at the spool (bounds, config refreshes, other processes' rows).
MAX_NAP = 5.0
#: After an unexpected error the loop pauses this long, then carries on.
ERROR_NAP = 1.0
#: report() wakes the sender to checkpoint after this many commits (~2.5 MB of WAL), even
#: when no batch is due (offline, backing off), so the WAL stays bounded (statedb.WAL_LIMIT).
CHECKPOINT_EVERY = 1000
#: A file of this size kept in state_dir and deleted when the disk is full: the room to
#: checkpoint the WAL and commit the claims and deletions that deliver the spool (a full disk
#: refuses even a DELETE's WAL frames). The "ballast file" of CockroachDB, for the same reason.
RESERVE_FILENAME = "ldptel-reserve"
RESERVE_BYTES = 256 * 1024


@dataclass(frozen=True)
class Connections:
    """How the Sender reaches the Reporter's state: its lock (held for every use of the
    connection) and its connection (None once closed or not open)."""

    lock: threading.Lock
    get: Callable[[], sqlite3.Connection | None]


@dataclass(frozen=True)
class Campaigns:
    """The Reporter's campaign bookkeeping the Sender calls (from its thread)."""

    refresh: Callable[[], None]  # revalidate the configs asked for
    refused: Callable[[str], None]  # a batch of this campaign was refused: re-fetch its config
    #: (under the state lock, before a batch is formed) make every spooled report postable
    #: only in the collector's window it is charged to (ledger.settle); `now` is time.time()
    windows: Callable[[sqlite3.Connection, float], None] = lambda conn, now: None


class Sender:
    """Delivery of one Reporter's spool (see the module docstring for the interface)."""

    def __init__(
        self,
        settings: Settings,
        state_dir: Path,
        transport: Transport,
        state: Connections,
        campaigns: Campaigns,
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.transport = transport
        self._state = state
        self._campaigns = campaigns
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._new_sync_objects()
        self._thread: threading.Thread | None = None
        self._stopping = False
        #: flush() calls waiting (a flush sends batches however small and young).
        self.flushing = 0
        self._unsent = 0  # reports spooled since the sender last made progress
        self._since_checkpoint = 0
        self._posting: spool.Batch | None = None
        self._failures = 0
        self._hold_until = 0.0
        self._batch_limit = settings.batch_size
        self._disk_full = False
        #: The last delivery error ("HTTP 503: ..."), None once a batch is delivered.
        self.last_error: str | None = None
        self._told: str | None = None  # the last error passed to on_error (_tell)

    def _new_sync_objects(self) -> None:
        self._checkpoint_lock = threading.Lock()
        self._wake = threading.Event()
        self._progress = threading.Condition()

    # -- what the Reporter calls -------------------------------------------------------------
    def spooled(self) -> bool:
        """(Under the state lock) a report was committed; True if the sender should be woken
        (the first unsent report, a batch just full, a checkpoint due, or no thread yet).
        Once, as the batch fills: while the sender backs off (offline) every later report
        would wake it for a round that posts nothing (the spool's bounds, a checkpoint: the
        process's CPU 68-72 instead of 57 us a report, benchmarks/README.md); it naps at most
        MAX_NAP between rounds, so a wake lost to its wait()/clear() costs at most that."""
        self._unsent += 1
        self._since_checkpoint += 1
        return (
            self._thread is None
            or self._unsent == 1
            or self._unsent == self._batch_limit
            or self._since_checkpoint >= CHECKPOINT_EVERY
        )

    def wake(self) -> None:
        """Start the thread if it is not running, else wake it."""
        if self._thread is None:
            self.start()
        else:
            self._wake.set()

    def start(self) -> None:
        with self._progress:
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(target=self._run, name="ldptel-sender", daemon=True)
                self._thread.start()

    def accepting(self) -> bool:
        """False while the disk is full: report() writes nothing until the spool has been
        delivered into the room the reserve left, and the reserve is made again."""
        return not self._disk_full

    def disk_full(self) -> None:
        """A write failed for lack of space: free the reserve and deliver."""
        if not self._disk_full:
            LOG.warning("ldptel: disk full; reports resume once the spool is delivered")
        self._disk_full = True
        self.wake()

    def flush(self, timeout: float) -> bool:
        """Send everything spooled now; True once none of what was spooled at the call is
        left (delivered, dead-lettered or dropped), False after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._state.lock:
            conn = self._state.get()
            if conn is None:
                return False
            mark = spool.last_id(conn)
        with self._progress:
            self.flushing += 1
        try:
            woken = False
            while True:
                with self._state.lock:
                    conn = self._state.get()
                    if conn is None:
                        return False
                    if not spool.holds_up_to(conn, mark):
                        return True
                if not woken:  # (not for an empty spool: no thread started for nothing)
                    self.wake()
                    woken = True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                with self._progress:
                    self._progress.wait(min(left, 0.1))
        finally:
            with self._progress:
                self.flushing -= 1

    def stop(self, timeout: float) -> None:
        """Stop the thread (waiting up to `timeout` for it); free the batch it may still be
        posting for the next Reporter (it would wait CLAIM_SECONDS), and close the checkpoint
        connection. Call before the Reporter closes its connection."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=max(timeout, 0.1))
        with self._checkpoint_lock, self._state.lock:
            posting, conn = self._posting, self._state.get()
            if posting is not None and conn is not None:
                spool.release(conn, posting)  # a resend keeps its key
            if self._checkpoint_conn is not None:
                self._checkpoint_conn.close()
                self._checkpoint_conn = None

    def checkpoint(self, truncate: bool = False) -> None:
        """Copy the WAL into the database on a second connection, so the fsync never holds
        the lock report() takes; truncate the WAL when it grew too large (or `truncate`)."""
        with self._checkpoint_lock:
            if self._state.get() is None:
                return
            if self._checkpoint_conn is None:
                self._checkpoint_conn = statedb.open_state(self.state_dir, ())
            self._since_checkpoint = 0
            if truncate:
                self._checkpoint_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                statedb.checkpoint(self._checkpoint_conn, self.state_dir)

    # -- fork (the Reporter's hooks call these around its own) --------------------------------
    def before_fork(self) -> None:
        # No SQLite connection may be inherited: close it with the lock held.
        self._checkpoint_lock.acquire()
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
            self._checkpoint_conn = None

    def after_fork_parent(self) -> None:
        self._checkpoint_lock.release()

    def after_fork_child(self) -> None:
        self._new_sync_objects()
        self._thread = None  # threads do not survive fork; the next report starts one
        self._posting = None  # the parent's sender posts its batch
        self.flushing = 0
        self.transport.reset()

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping:
            try:
                if self._disk_full:  # room for the WAL's frames of claims and deletions
                    self._free_reserve()
                    self.checkpoint(truncate=True)
                nap = self._step()
                # Every round, also when nothing was sent (offline, backing off): the WAL
                # grows with every report() until it is checkpointed.
                self.checkpoint()
                if self._disk_full and nap > 0:  # the spool is out (or cannot go now)
                    self.checkpoint(truncate=True)
                    if self.make_reserve():
                        self._disk_full = False
                        self._batch_limit = self.settings.batch_size
            except Exception as error:  # never let the thread die; the app must not notice
                nap = self._failed(error)
            if nap > 0 and not self._stopping:
                self._wake.wait(nap)
                self._wake.clear()

    def _failed(self, error: Exception) -> float:
        if isinstance(as_ldptel_error(error), DiskFullError):
            # Even with the reserve freed, a claim of a large batch may need more pages than
            # are left: claim smaller ones (the limit is restored once the disk has room).
            self._disk_full = True
            self._batch_limit = max(1, self._batch_limit // 2)
            return min(MAX_NAP, self.settings.backoff_base)
        LOG.exception("ldptel sender: unexpected error (will retry)")
        return ERROR_NAP

    def make_reserve(self) -> bool:
        """Create the reserve file if it is missing; False if there is no room for it."""
        path = self.state_dir / RESERVE_FILENAME
        try:
            if path.exists() and path.stat().st_size >= RESERVE_BYTES:
                return True
            with path.open("wb") as reserve:
                allocate = getattr(os, "posix_fallocate", None)  # not on macOS or Windows
                try:
                    if allocate is None:
                        raise OSError(errno.EOPNOTSUPP, "no posix_fallocate")
                    allocate(reserve.fileno(), 0, RESERVE_BYTES)
                except OSError as error:  # no fallocate here: write real blocks
                    if error.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    reserve.write(bytes(RESERVE_BYTES))
                    reserve.flush()
            return True
        except OSError:
            path.unlink(missing_ok=True)
            return False

    def _free_reserve(self) -> None:
        (self.state_dir / RESERVE_FILENAME).unlink(missing_ok=True)

    def _step(self) -> float:
        """One round: refresh stale configs, keep the spool bounded, send at most one batch.
        Returns how long to nap before the next round (0: go again now)."""
        settings = self.settings
        self._campaigns.refresh()
        now = time.time()
        with self._state.lock:
            conn = self._state.get()
            if conn is None:
                return MAX_NAP
            spool.enforce_bounds(
                conn, settings.max_spool_rows, settings.max_spool_bytes, settings.max_dead_letters
            )
            if now < self._hold_until:  # backing off: the collector is down or busy
                return min(MAX_NAP, self._hold_until - now)
            self._campaigns.windows(conn, now)  # post reports only in their charged window
            # A full disk empties the spool as a flush does, to give its room back.
            force = self.flushing > 0 or self._stopping or self._disk_full
            batch = spool.claim(conn, now, self._batch_limit, settings.max_batch_age, force)
            if batch is None:
                due = spool.next_due(conn, settings.max_batch_age)
                return MAX_NAP if due is None else min(MAX_NAP, max(0.01, due - now))
            self._posting = batch
        outcome = self._post(batch)
        with self._state.lock:
            self._posting = None
            conn = self._state.get()
            if conn is None:  # closed meanwhile: the batch stays claimed and is retried later
                return 0.0
            problem = self._settle(conn, batch, outcome)
        self._tell(problem)  # not under the lock: on_error may call report()
        self._unsent = 0
        with self._progress:
            self._progress.notify_all()
        return 0.0

    def _post(self, batch: spool.Batch) -> Outcome:
        try:
            # Durable against a power loss before the collector can store it (statedb): or a
            # rebooted client could re-spend the epsilon of reports already sent, or resend
            # them under a new idempotency key.
            statedb.sync_wal(self.state_dir)
            return self.transport.post_batch(
                batch.campaign, batch.config_id, batch.key, batch.reports, batch.level
            )
        except Exception:  # a bug, not the network: back off and retry the batch, same key
            LOG.exception("ldptel sender: unexpected error while posting (will retry)")
            return Outcome("retry", None, "unexpected client error")

    def _settle(
        self, conn: sqlite3.Connection, batch: spool.Batch, outcome: Outcome
    ) -> DeliveryError | None:
        """Record the collector's answer to `batch` (under the state lock); returns the error
        to tell the app, if any. Only a 2xx is recorded whoever holds the batch's claim now;
        the other answers change the batch only if this sender still holds it (else its claim
        expired while we waited, another sender took the batch under the same key, and that
        one's answer decides)."""
        now = time.time()
        if outcome.verdict == "delivered":
            spool.delivered(conn, batch)
            self.last_error = None
            self._failures = 0
            self._told = None
            return None
        error = f"HTTP {outcome.status}: {outcome.reason}"
        verdict: Verdict | Literal["lost"] = outcome.verdict
        problem = outcome.problem
        if verdict == "token":
            verdict, problem = self._token_refused(conn, batch, outcome, now)
        held = False
        if verdict == "retry":
            # One backoff for the whole sender, not per batch: a collector that is down gets
            # one request per backoff period however many batches wait.
            settings = self.settings
            delay = backoff_delay(
                self._failures, settings.backoff_base, settings.backoff_cap, outcome.retry_after
            )
            self._failures += 1
            self._hold_until = now + delay
            self.last_error = error
            held = spool.retry_later(conn, batch, now + delay)
            LOG.info(
                "ldptel: batch of %d reports not delivered (%s); retry in %.1f s",
                len(batch.reports),
                error,
                delay,
            )
        elif verdict == "too_large" and len(batch.reports) > 1:
            self._batch_limit = max(1, len(batch.reports) // 2)
            held = spool.dissolve(conn, batch)  # never stored: its rows go out in halves
        elif verdict != "lost":
            self.last_error = error
            self._failures = 0
            held = spool.dead_letter(conn, batch, outcome.status, outcome.reason, now)
            if held:
                LOG.warning(
                    "ldptel: collector refused %d reports of campaign %r for good (%s); "
                    "kept as dead letters",
                    len(batch.reports),
                    batch.campaign,
                    error,
                )
                problem = problem or ReportsRefusedError(
                    "reports",
                    f"the collector refused reports of campaign {batch.campaign!r} for good "
                    f"({error}); they are kept as dead letters",
                    outcome.status,
                )
            self._campaigns.refused(batch.campaign)
        if not held:
            LOG.info("ldptel: the claim on a batch expired; another sender has it now")
            return None
        return problem

    def _token_refused(
        self, conn: sqlite3.Connection, batch: spool.Batch, outcome: Outcome, now: float
    ) -> tuple[Verdict | Literal["lost"], DeliveryError | None]:
        """A fixed token could deliver the batch: retry it until auth_wait has passed since
        its first refusal, then dead-letter it ("lost": its claim was lost meanwhile)."""
        since = spool.refused_since(conn, batch, now)
        wait = self.settings.auth_wait
        if since is None:
            return "lost", None
        if now - since < wait:
            return "retry", outcome.problem
        return "reject", TokenRefusedError(
            "token",
            f"{outcome.reason}; reports of campaign {batch.campaign!r} were dead-lettered "
            f"after waiting auth_wait = {wait:g} s for a fixed token",
            outcome.status,
        )

    def _tell(self, problem: DeliveryError | None) -> None:
        """Pass a delivery error to on_error (and log it), once until it changes or a batch
        is delivered: a retry of the same answer tells nothing new."""
        if problem is None or str(problem) == self._told:
            return
        self._told = str(problem)
        if not isinstance(problem, ReportsRefusedError):  # (logged with its count above)
            LOG.warning("ldptel: reports wait in the spool: %s", problem)
        on_error = self.settings.on_error
        if on_error is not None:
            try:
                on_error(problem)
            except Exception:
                LOG.exception("ldptel: the on_error callback raised")
