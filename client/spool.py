"""The durable spool: perturbed wire reports waiting for the collector's 2xx.

Rows are appended by report() (inside its ledger transaction) and grouped by the sender into
batches; a batch keeps its idempotency key and its rows until the collector answers, so a
retry, even after a crash, resends the same rows under the same key and is stored once.
A batch holds reports of one (campaign, config, privacy level): the level travels in the
batch's envelope (docs/personalized-privacy.md). Only perturbed reports are stored here.
Functions take the connection; callers hold the Reporter's state lock and, for writes, run
inside BEGIN IMMEDIATE ... COMMIT.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from dataclasses import dataclass

from ldptel.client.statedb import Column, add_counter, transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS spool (
  id INTEGER PRIMARY KEY, campaign TEXT NOT NULL, config_id TEXT NOT NULL,
  window_start INTEGER NOT NULL, created REAL NOT NULL, report TEXT NOT NULL, batch INTEGER,
  level TEXT NOT NULL DEFAULT '', held INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS spool_batch ON spool (batch) WHERE batch IS NOT NULL;
CREATE TABLE IF NOT EXISTS batches (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL, campaign TEXT NOT NULL, config_id TEXT NOT NULL,
  attempts INTEGER NOT NULL, next_at REAL NOT NULL, owner INTEGER NOT NULL,
  level TEXT NOT NULL DEFAULT '', refused_at REAL
);
CREATE TABLE IF NOT EXISTS dead_letters (
  id INTEGER PRIMARY KEY, campaign TEXT NOT NULL, config_id TEXT NOT NULL, report TEXT NOT NULL,
  status INTEGER, reason TEXT NOT NULL, at REAL NOT NULL, level TEXT NOT NULL DEFAULT ''
);
"""
#: The privacy level came after the first release: a state_dir from before gets the column
#: ('' = no level, which is what its rows were).
COLUMNS: tuple[Column, ...] = tuple(
    (table, "level", "TEXT NOT NULL DEFAULT ''") for table in ("spool", "batches", "dead_letters")
)
#: A report held back by the ledger (charged to a window other than the collector's current
#: one and without room in it: ldptel.client.ledger.settle) is not batched while held.
COLUMNS += (("spool", "held", "INTEGER NOT NULL DEFAULT 0"),)
#: When the collector first refused the ingest token for a batch (NULL: never): the batch
#: waits the Reporter's auth_wait from then for a fixed token, then is dead-lettered.
COLUMNS += (("batches", "refused_at", "REAL"),)

_APPEND = (
    "INSERT INTO spool (campaign, config_id, window_start, created, report, level) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
#: A claimed batch is left alone by other processes' senders for this long (its request's
#: timeout must be shorter); after that anyone may retry it, under the same key.
CLAIM_SECONDS = 120.0
#: A claim (a lease): the batch row still has the owner and next_at its claim wrote.
_HELD = "id = ? AND owner = ? AND next_at = ?"


@dataclass(frozen=True)
class Batch:
    """A claimed batch: its rows, its key, and its lease (owner pid, held until `lease`)."""

    id: int
    key: str
    campaign: str
    config_id: str
    attempts: int
    reports: list[str]
    level: str = ""
    owner: int = 0
    lease: float = 0.0

    def held(self) -> tuple[int, int, float]:
        return (self.id, self.owner, self.lease)


def append(
    conn: sqlite3.Connection,
    campaign: str,
    config_id: str,
    window: int,
    now: float,
    report: str,
    level: str = "",
) -> None:
    conn.execute(_APPEND, (campaign, config_id, window, now, report, level))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claimable_batch(conn: sqlite3.Connection, now: float) -> tuple[int, ...] | None:
    """The oldest formed batch that is due, or whose claiming process is gone."""
    for row in conn.execute("SELECT id, next_at, owner FROM batches ORDER BY id"):
        batch_id, next_at, owner = row
        if next_at <= now or not _alive(owner):
            return (batch_id,)
    return None


def _form_batch(
    conn: sqlite3.Connection, now: float, batch_size: int, max_age: float, force: bool
) -> int | None:
    """Group the oldest unbatched reports of one (campaign, config, level) into a new batch,
    if it is due: full, old enough, or forced (flush)."""
    first = conn.execute(
        "SELECT campaign, config_id, level, created FROM spool WHERE batch IS NULL AND NOT held "
        "ORDER BY id LIMIT 1"
    ).fetchone()
    if first is None:
        return None
    campaign, config_id, level, created = first
    group = "FROM spool WHERE batch IS NULL AND NOT held AND campaign = ? AND config_id = ? "
    group += "AND level = ?"
    if not force and created + max_age > now:
        (count,) = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 {group} LIMIT ?)",
            (campaign, config_id, level, batch_size),
        ).fetchone()
        if count < batch_size:
            return None
    cursor = conn.execute(
        "INSERT INTO batches (key, campaign, config_id, level, attempts, next_at, owner) "
        "VALUES (?, ?, ?, ?, 0, 0, ?)",
        (uuid.uuid4().hex, campaign, config_id, level, os.getpid()),
    )
    batch_id = int(cursor.lastrowid or 0)
    conn.execute(
        f"UPDATE spool SET batch = ? WHERE id IN (SELECT id {group} ORDER BY id LIMIT ?)",
        (batch_id, campaign, config_id, level, batch_size),
    )
    return batch_id


def claim(
    conn: sqlite3.Connection, now: float, batch_size: int, max_age: float, force: bool
) -> Batch | None:
    """The next batch to send (a due retry first, else a newly formed one), claimed for this
    process; None if nothing is due. Runs its own write transaction."""
    with transaction(conn):
        found = _claimable_batch(conn, now)
        batch_id = found[0] if found else _form_batch(conn, now, batch_size, max_age, force)
        if batch_id is None:
            return None
        lease, owner = now + CLAIM_SECONDS, os.getpid()
        conn.execute(
            "UPDATE batches SET next_at = ?, owner = ? WHERE id = ?", (lease, owner, batch_id)
        )
        key, campaign, config_id, attempts, level = conn.execute(
            "SELECT key, campaign, config_id, attempts, level FROM batches WHERE id = ?",
            (batch_id,),
        ).fetchone()
        reports = [
            str(r) for (r,) in conn.execute("SELECT report FROM spool WHERE batch = ?", (batch_id,))
        ]
        if not reports:  # its rows were dropped by the bound: nothing left to send
            conn.execute("DELETE FROM batches WHERE id = ?", (batch_id,))
            return None
    return Batch(batch_id, key, campaign, config_id, attempts, reports, level, owner, lease)


def delivered(conn: sqlite3.Connection, batch: Batch) -> None:
    """The collector stored the batch (2xx): forget it, whoever holds its claim now (counted
    once: a batch two senders both saw stored is counted by the first)."""
    with transaction(conn):
        gone = conn.execute("DELETE FROM spool WHERE batch = ?", (batch.id,)).rowcount
        conn.execute("DELETE FROM batches WHERE id = ?", (batch.id,))
        add_counter(conn, "delivered", gone)


def _holds(conn: sqlite3.Connection, batch: Batch) -> bool:
    return conn.execute(f"SELECT 1 FROM batches WHERE {_HELD}", batch.held()).fetchone() is not None


def retry_later(conn: sqlite3.Connection, batch: Batch, at: float) -> bool:
    """Keep the batch (same rows, same key) for another attempt at `at`. This and the other
    answers below change the batch only while `batch`'s claim holds; False if it was lost."""
    with transaction(conn):
        return (
            conn.execute(
                f"UPDATE batches SET attempts = attempts + 1, next_at = ? WHERE {_HELD}",
                (at, *batch.held()),
            ).rowcount
            > 0
        )


def refused_since(conn: sqlite3.Connection, batch: Batch, now: float) -> float | None:
    """The collector refused the token for `batch`: when it first did (`now` if this is the
    first time); None if the batch's claim was lost."""
    with transaction(conn):
        row = conn.execute(f"SELECT refused_at FROM batches WHERE {_HELD}", batch.held()).fetchone()
        if row is None:
            return None
        if row[0] is None:
            conn.execute("UPDATE batches SET refused_at = ? WHERE id = ?", (now, batch.id))
            return now
        return float(row[0])


def awaiting_token(conn: sqlite3.Connection) -> tuple[int, float | None]:
    """How many spooled reports are in batches the collector refused the token for, and
    when the first of those batches was first refused (None if none)."""
    count, first = conn.execute(
        "SELECT count(*), min(b.refused_at) FROM spool s JOIN batches b ON s.batch = b.id "
        "WHERE b.refused_at IS NOT NULL"
    ).fetchone()
    return int(count), None if first is None else float(first)


def release(conn: sqlite3.Connection, batch: Batch) -> bool:
    """Make a claimed batch due now (its sender is stopping before the collector answered)."""
    with transaction(conn):
        released = conn.execute(f"UPDATE batches SET next_at = 0 WHERE {_HELD}", batch.held())
        return released.rowcount > 0


def dissolve(conn: sqlite3.Connection, batch: Batch) -> bool:
    """Return a batch's rows to the spool (it was refused as too large, so never stored)."""
    with transaction(conn):
        if not _holds(conn, batch):
            return False
        conn.execute("UPDATE spool SET batch = NULL WHERE batch = ?", (batch.id,))
        conn.execute("DELETE FROM batches WHERE id = ?", (batch.id,))
        return True


def dead_letter(
    conn: sqlite3.Connection, batch: Batch, status: int | None, reason: str, now: float
) -> bool:
    """The collector refused the batch for good (4xx): keep its rows aside, counted."""
    with transaction(conn):
        if not _holds(conn, batch):
            return False
        conn.execute(
            "INSERT INTO dead_letters (campaign, config_id, level, report, status, reason, at) "
            "SELECT campaign, config_id, level, report, ?, ?, ? FROM spool WHERE batch = ?",
            (status, reason, now, batch.id),
        )
        conn.execute("DELETE FROM spool WHERE batch = ?", (batch.id,))
        conn.execute("DELETE FROM batches WHERE id = ?", (batch.id,))
        add_counter(conn, "dead_lettered", len(batch.reports))
        return True


def used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the state database in use (pages not on the free list)."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


def rows(conn: sqlite3.Connection) -> int:
    (count,) = conn.execute("SELECT count(*) FROM spool").fetchone()
    return int(count)


def last_id(conn: sqlite3.Connection) -> int:
    """The id of the newest spooled report (0 if none): a mark for `holds_up_to`."""
    (newest,) = conn.execute("SELECT max(id) FROM spool").fetchone()
    return int(newest or 0)


def holds_up_to(conn: sqlite3.Connection, mark: int) -> bool:
    """Whether a report with id <= mark is still spooled. (Ids are max + 1, so once the
    newest rows are gone a new row may reuse an id <= mark: a flush then also waits for it.)"""
    return conn.execute("SELECT 1 FROM spool WHERE id <= ? LIMIT 1", (mark,)).fetchone() is not None


def enforce_bounds(
    conn: sqlite3.Connection, max_rows: int, max_bytes: int, max_dead_letters: int
) -> int:
    """Drop the oldest windows' reports (whole batches at a time) until the spool holds at
    most max_rows and the database max_bytes; returns how many reports were dropped."""
    dropped = 0
    while True:
        excess = rows(conn) - max_rows
        if excess <= 0 and used_bytes(conn) <= max_bytes:
            break
        victims = max(excess, 1, max_rows // 20)
        with transaction(conn):
            oldest = "SELECT id, batch FROM spool ORDER BY window_start, id LIMIT ?"
            picked = conn.execute(oldest, (victims,)).fetchall()
            batches = sorted({b for _, b in picked if b is not None})
            before = conn.total_changes
            conn.executemany("DELETE FROM spool WHERE id = ?", [(i,) for i, _ in picked])
            conn.executemany("DELETE FROM spool WHERE batch = ?", [(b,) for b in batches])
            conn.executemany("DELETE FROM batches WHERE id = ?", [(b,) for b in batches])
            gone = conn.total_changes - before - len(batches)
            add_counter(conn, "dropped", gone)
        if not picked:
            break
        dropped += gone
    conn.execute(
        "DELETE FROM dead_letters WHERE id <= (SELECT max(id) FROM dead_letters) - ?",
        (max_dead_letters,),
    )
    return dropped


def next_due(conn: sqlite3.Connection, max_age: float) -> float | None:
    """When something may next be due: a batch's retry time or the oldest report's age."""
    (retry,) = conn.execute("SELECT min(next_at) FROM batches").fetchone()
    first = conn.execute(
        "SELECT created FROM spool WHERE batch IS NULL AND NOT held ORDER BY id LIMIT 1"
    ).fetchone()
    times = [t for t in (retry, None if first is None else first[0] + max_age) if t is not None]
    return min(times) if times else None
