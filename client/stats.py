"""What a Reporter tells the app about itself besides delivery (client/sender.py): each
report() call that spooled nothing (`Outcomes`: counted by status, logged the first time per
status, passed to on_error, raised with strict=True), and `stats()` (`read_stats`: those
counts beside the spool's and delivery's counters, persisted in state_dir)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from typing import TypedDict

from ldptel.client import spool, statedb
from ldptel.client.errors import DiskFullError
from ldptel.client.sender import Sender
from ldptel.client.settings import Settings
from ldptel.client.state import State
from ldptel.client.status import ReportStatus, as_ldptel_error, status_of

LOG = logging.getLogger("ldptel.client")


class Stats(TypedDict):
    """Reporter.stats(): the spool's and delivery's counters (persisted in state_dir), the
    last delivery error, and this process's report() calls that spooled nothing, by status."""

    spooled: int
    pending_batches: int
    delivered: int
    dead_lettered: int
    dropped: int
    last_error: str | None
    not_spooled: dict[str, int]
    awaiting_token: int
    awaiting_token_until: float | None


class Outcomes:
    """This process's report() calls that spooled nothing, by status; `disk_full` is called
    when one failed for lack of space (the sender frees its reserve and delivers)."""

    def __init__(self, settings: Settings, disk_full: Callable[[], None]) -> None:
        self.settings = settings
        self._disk_full = disk_full
        self._not_spooled: Counter[ReportStatus] = Counter()
        self._lock = threading.Lock()
        self._logged: set[ReportStatus] = set()

    def refused(self, raw: Exception, what: str) -> ReportStatus:
        """An error instead of a report (or of opening the state): counted, logged (the first
        time per status), passed to on_error; raised if strict, else its status returned."""
        error = as_ldptel_error(raw)
        status = status_of(error)
        self.count(status)
        if isinstance(error, DiskFullError):
            self._disk_full()
        first = status not in self._logged
        self._logged.add(status)
        if status is ReportStatus.INTERNAL_ERROR:
            LOG.error("ldptel: %s failed: %s", what, error, exc_info=raw if first else None)
        elif status is ReportStatus.BUDGET_EXHAUSTED:
            LOG.info("ldptel: %s skipped: %s", what, error)
        else:
            LOG.log(logging.WARNING if first else logging.DEBUG, "ldptel: %s: %s", what, error)
        if self.settings.on_error is not None:
            try:
                self.settings.on_error(error)
            except Exception:
                LOG.exception("ldptel: the on_error callback raised")
        if self.settings.strict:
            if error is raw:
                raise error
            raise error from raw
        return status

    def count(self, status: ReportStatus) -> None:
        with self._lock:
            self._not_spooled[status] += 1

    def not_spooled(self) -> dict[str, int]:
        with self._lock:
            return {status.value: n for status, n in self._not_spooled.items()}

    def after_fork_child(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork


def read_stats(state: State, outcomes: Outcomes, sender: Sender, auth_wait: float) -> Stats:
    """Reporter.stats() (its docstring says what each field is); the counters on disk read 0
    when the state cannot be read. The sender's last error is read after the state lock was
    held: a delivery it was recording then is seen."""
    counters: dict[str, int] = {}
    batches = spooled = awaiting = 0
    refused_at: float | None = None
    with state.lock:
        if state.conn is not None:
            try:
                counters = statedb.counters(state.conn)
                (batches,) = state.conn.execute("SELECT count(*) FROM batches").fetchone()
                spooled = spool.rows(state.conn)
                awaiting, refused_at = spool.awaiting_token(state.conn)
            except sqlite3.Error as error:
                LOG.warning("ldptel: stats() cannot read the state: %s", error)
    return {
        "spooled": spooled,
        "pending_batches": int(batches),
        "delivered": counters.get("delivered", 0),
        "dead_lettered": counters.get("dead_lettered", 0),
        "dropped": counters.get("dropped", 0),
        "last_error": sender.last_error,
        "not_spooled": outcomes.not_spooled(),
        "awaiting_token": awaiting,
        "awaiting_token_until": None if refused_at is None else refused_at + auth_wait,
    }
