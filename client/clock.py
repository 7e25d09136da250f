"""The collector's clock, as this client knows it: where the ledger's windows come from.

The collector files every report in the window of its own clock at arrival (collector/ingest.py)
and the aggregator counts per that window. A ledger keyed by the device's clock would let a
device whose clock is set forward or back put more than the per-window budget into one of those
windows. So the client reads the collector's time from the `Date` header of every answer
(RFC 9110, 1 s resolution) and carries it forward on `time.monotonic()`, which no setting of
the device clock moves. Until the first answer in this process it uses the device clock plus
the offset last learned (persisted), never earlier than the collector's latest time it has
seen (a persisted floor: a device clock set back cannot reopen a window the ledger has since
forgotten); the sender posts nothing before an answer has set the clock (`synced`). The
monotonic clock runs from the machine's boot for every process, so an answer seen by an
earlier process of the same boot (Linux's boot_id) sets the clock of later ones too.
"""

from __future__ import annotations

import email.utils
import hashlib
import sqlite3
import threading
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS server_clock (name TEXT PRIMARY KEY, value REAL NOT NULL)
  WITHOUT ROWID;
"""


def device_time() -> float:
    """The device's wall clock (tests replace it to set the device clock wrong)."""
    return time.time()


def boot_id() -> float | None:
    """This boot's identity as an exact float (None where the platform does not say)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as source:
            digest = hashlib.sha256(source.read().strip()).digest()
    except OSError:
        return None
    return float(int.from_bytes(digest[:6], "big"))  # 48 bits: exact in a double


def parse_date(value: str | None) -> float | None:
    """An HTTP Date header as unix seconds (None if absent or malformed)."""
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return None if when is None else when.timestamp()


class ServerClock:
    """The collector's time: `now()`; fed by `observe(date)` with each answer's Date."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: server time - device time, last learned (0 before any answer ever).
        self._offset = 0.0
        self._floor = 0.0
        #: (server time, monotonic time) of the last answer in this process.
        self._anchor: tuple[float, float] | None = None

    def load(self, conn: sqlite3.Connection) -> None:
        """Take the offset and floor persisted by an earlier process (`save`)."""
        saved = dict(conn.execute("SELECT name, value FROM server_clock").fetchall())
        boot = boot_id()
        with self._lock:
            self._offset = float(saved.get("offset", self._offset))
            self._floor = max(self._floor, float(saved.get("floor", 0.0)))
            same_boot = boot is not None and saved.get("boot") == boot
            if self._anchor is None and same_boot and "anchor_server" in saved:
                self._anchor = (float(saved["anchor_server"]), float(saved["anchor_mono"]))

    @property
    def synced(self) -> bool:
        """Whether an answer of the collector has set the clock in this process."""
        return self._anchor is not None

    def now(self) -> float:
        with self._lock:
            if self._anchor is None:
                return max(device_time() + self._offset, self._floor)
            server, mono = self._anchor
            self._floor = max(self._floor, server + (time.monotonic() - mono))
            return self._floor

    def observe(self, date: float | None) -> None:
        """An answer's Date: re-anchor on it (its 1 s truncation is at most 1 s behind). An
        answer without one (RFC 9110 requires it of a server with a clock) anchors the
        current estimate, so that the sender is not stopped by it."""
        if date is None:
            if self._anchor is None:
                estimate = self.now()
                with self._lock:
                    self._anchor = (estimate, time.monotonic())
            return
        with self._lock:
            self._anchor = (date, time.monotonic())
            self._offset = date - device_time()
            self._floor = max(self._floor, date)

    def save(self, conn: sqlite3.Connection) -> None:
        """Persist the offset and the floor (inside the caller's transaction)."""
        with self._lock:
            values = [("offset", self._offset), ("floor", self._floor)]
            boot = boot_id()
            if self._anchor is not None and boot is not None:
                server, mono = self._anchor
                values += [("anchor_server", server), ("anchor_mono", mono), ("boot", boot)]
        conn.executemany("INSERT OR REPLACE INTO server_clock VALUES (?, ?)", values)
