"""The client's state on disk: one SQLite database in `state_dir` holding the spool, the
privacy ledger, the memo and the cached campaign configs.

One database, so that a report's ledger charge, its memo entry and its spool row commit in
one transaction: a crash can lose a report, never spend epsilon without recording it. WAL with
synchronous=NORMAL: a commit is a write() into the WAL (it survives a killed process without
an fsync per report); the sender checkpoints (`checkpoint`), so report() waits for an fsync
only when the WAL has to be truncated, once per WAL_LIMIT bytes of commits. A power loss (or
OS crash) can undo the commits made since the WAL was last synced, whole transactions only
(WAL frames are checksummed): so the sender syncs it (`sync_wal`) before posting a batch, and
nothing the collector may have stored can be undone here (its ledger charges, memos, key).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

FILENAME = "ldptel-state.sqlite"
#: Small pages: a report's commit writes two pages into the WAL (ledger row, spool row).
PAGE_SIZE = 1024
BUSY_TIMEOUT_MS = 10_000
#: The WAL file is truncated once it is this large. A PASSIVE checkpoint never blocks a
#: writer, but while report() keeps committing it never finds the WAL idle, so SQLite never
#: rewinds it and the file grows by every commit (~2.5 KB a report) without this.
WAL_LIMIT = 4 * 1024 * 1024
#: How long a truncating checkpoint waits for other connections (it blocks their writes).
TRUNCATE_WAIT_MS = 200

#: (table, column, declaration) of a column added after the table's first release.
Column = tuple[str, str, str]

_COMMON_SCHEMA = """
CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)
  WITHOUT ROWID;
"""


def open_state(
    state_dir: str | os.PathLike[str],
    schemas: Iterable[str],
    columns: Iterable[Column] = (),
) -> sqlite3.Connection:
    """Open (creating if needed) the state database with the modules' tables and `columns`
    (added to tables of an older state_dir); autocommit mode, explicit BEGINs."""
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / FILENAME
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # effective only on a new file
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # the sender checkpoints, off the hot path
    with transaction(conn):
        for script in (_COMMON_SCHEMA, *schemas):
            for statement in filter(str.strip, script.split(";")):
                conn.execute(statement)
        for column in columns:
            add_column(conn, column)
    os.chmod(path, 0o600)
    return conn


def add_column(conn: sqlite3.Connection, column: Column) -> None:
    """ALTER TABLE ADD COLUMN unless the table has it (inside the caller's write transaction,
    so two processes opening one old state_dir migrate it once)."""
    table, name, declaration = column
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    if name not in present:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")


class Transaction:
    """BEGIN IMMEDIATE (take the write lock now, so reads inside are current) ... COMMIT, or
    ROLLBACK on any exception. A class, not a generator: report() enters one per call, and
    this costs it a third as much."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            try:
                self._conn.execute("COMMIT")
                return
            except sqlite3.Error:  # e.g. SQLITE_FULL: the transaction may still be open
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        if self._conn.in_transaction:  # SQLite rolls back itself after some errors
            self._conn.execute("ROLLBACK")


transaction = Transaction


def checkpoint(conn: sqlite3.Connection, state_dir: str | os.PathLike[str]) -> None:
    """Copy the WAL into the database without blocking writers; truncate the WAL file when
    it has grown past WAL_LIMIT (blocking writers for that one checkpoint's copy and fsync;
    if another connection is busy for longer than TRUNCATE_WAIT_MS, the next call retries)."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    try:
        size = os.path.getsize(Path(state_dir) / f"{FILENAME}-wal")
    except OSError:  # no WAL file: nothing to truncate
        return
    if size > WAL_LIMIT:
        conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def sync_wal(state_dir: str | os.PathLike[str]) -> None:
    """fsync the WAL: every commit written so far then survives a power loss too, not only a
    killed process. (SQLite takes no lock on the WAL file, so another descriptor is safe.)"""
    try:
        fd = os.open(Path(state_dir) / f"{FILENAME}-wal", os.O_RDWR)
    except FileNotFoundError:  # no WAL: every commit is in the database file, synced
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def secret(conn: sqlite3.Connection, name: str, size: int = 32) -> bytes:
    """A random secret stored in the state (created once, from the OS CSPRNG); call inside a
    write transaction or alone."""
    conn.execute("INSERT OR IGNORE INTO secrets VALUES (?, ?)", (name, os.urandom(size)))
    row = conn.execute("SELECT value FROM secrets WHERE name = ?", (name,)).fetchone()
    return bytes(row[0])


def add_counter(conn: sqlite3.Connection, name: str, amount: int) -> None:
    """Add to a persisted counter (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO counters VALUES (?, ?) ON CONFLICT DO UPDATE SET value = value + ?",
        (name, amount, amount),
    )


def counters(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: int(value) for name, value in conn.execute("SELECT name, value FROM counters")}


def fold(conn: sqlite3.Connection, other: Path) -> None:
    """Add another state database of the same install (a state_dir of an older SDK, at the
    current schema) into this one: ledger totals add up (epsilon spent stays spent), its
    RAPPOR clients are kept unless this one has its own, and its unsent reports are spooled
    here with their batches and idempotency keys (a resend is stored once)."""
    conn.execute("ATTACH DATABASE ? AS other", (str(other),))
    try:
        with transaction(conn):
            conn.execute(
                "INSERT INTO ledger_windows SELECT * FROM other.ledger_windows WHERE true "
                "ON CONFLICT DO UPDATE SET reports = reports + excluded.reports, "
                "epsilon = epsilon + excluded.epsilon"
            )
            conn.execute("INSERT OR IGNORE INTO rappor_clients SELECT * FROM other.rappor_clients")
            (offset,) = conn.execute("SELECT coalesce(max(id), 0) FROM batches").fetchone()
            conn.execute(
                "INSERT INTO batches (id, key, campaign, config_id, attempts, next_at, owner, "
                "level) SELECT id + ?, key, campaign, config_id, attempts, 0, 0, level "
                "FROM other.batches",
                (offset,),
            )
            conn.execute(
                "INSERT INTO spool (campaign, config_id, window_start, created, report, batch, "
                "level) SELECT campaign, config_id, window_start, created, report, batch + ?, "
                "level FROM other.spool ORDER BY id",
                (offset,),
            )
    finally:
        conn.execute("DETACH DATABASE other")
