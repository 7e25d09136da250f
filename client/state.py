"""A Reporter's hold on its install's state database (client/statedb.py): one connection,
used under one lock by report() and the sender, opened at start (an older SDK's state folded
in first, client/install.py), opened again on use after a failure (at most every
STATE_RETRY_SECONDS), closed by close() and around fork()."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from ldptel.client import ledger, spool, statedb
from ldptel.client.clock import ServerClock
from ldptel.client.errors import ReporterClosedError, StateError
from ldptel.client.install import SCHEMAS, migrate_legacy_state
from ldptel.client.statedb import transaction

#: A state database that could not be opened is tried again after this long.
STATE_RETRY_SECONDS = 30.0


class State:
    """The connection (`conn`, None while not open) and the lock held for every use of it;
    `closed` once the Reporter is closed; `memo_secret`, the install's memo key."""

    def __init__(self, state_dir: Path, legacy: Path | None, clock: ServerClock) -> None:
        self.state_dir = state_dir
        #: An older SDK's state for this URL, folded in when the state is opened.
        self._legacy = legacy
        self._clock = clock
        self.lock = threading.Lock()  # every use of self.conn
        self.conn: sqlite3.Connection | None = None
        self.closed = False
        self.memo_secret = b""
        self._failed_at = -STATE_RETRY_SECONDS
        self._reopen = False

    def open(self) -> sqlite3.Connection:
        """(Under the lock, or before another thread exists) open the state database,
        migrating an older one; a failure is remembered (live() waits before trying again)."""
        try:
            return self._open()
        except (sqlite3.Error, OSError):
            self._failed_at = time.monotonic()
            raise

    def _open(self) -> sqlite3.Connection:
        if self._legacy is not None:
            migrate_legacy_state(self._legacy, self.state_dir)
            self._legacy = None
        conn = statedb.open_state(self.state_dir, SCHEMAS, spool.COLUMNS)
        try:
            with transaction(conn):
                self.memo_secret = statedb.secret(conn, "memo")
                ledger.migrate(conn)
            self._clock.load(conn)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return conn

    def live(self) -> sqlite3.Connection:
        """(Under the lock) the state connection; opened again if it could not be (at most
        every STATE_RETRY_SECONDS)."""
        if self.conn is not None:
            return self.conn
        if self.closed:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        if time.monotonic() - self._failed_at < STATE_RETRY_SECONDS:
            raise StateError("state_dir", "could not be opened; trying again shortly")
        return self.open()

    def close(self) -> None:
        """Close the connection (the sender stopped first: it may still use it)."""
        with self.lock:
            if self.conn is not None:
                self.conn.close()
            self.conn = None

    # -- fork -----------------------------------------------------------------------------------
    def before_fork(self) -> None:
        # No transaction may be open across fork(), and SQLite connections must not be
        # inherited: close it with the lock held, reopen on both sides.
        self.lock.acquire()
        if self.conn is not None:
            self.conn.close()
        self._reopen = self.conn is not None
        self.conn = None

    def after_fork(self) -> None:
        """In the parent and in the child (where the forking thread holds the lock and no
        other thread exists): reopen, release the lock."""
        if self._reopen:
            try:
                self.conn = statedb.open_state(self.state_dir, ())
            except (sqlite3.Error, OSError):  # live() tries again
                self._failed_at = -STATE_RETRY_SECONDS
        self.lock.release()
