"""Where an install's state lives: one state_dir per ingest token (its identity, ledger,
memo and spool), and the move of an older SDK's URL-keyed state into it."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

import platformdirs
import xxhash

from ldptel.client import clock, ledger, lifetime, memo, spool, statedb

LOG = logging.getLogger("ldptel.client")
#: The tables of an install's state database.
SCHEMAS = (ledger.SCHEMA, lifetime.SCHEMA, memo.SCHEMA, spool.SCHEMA, clock.SCHEMA)


def default_state_dir(token: str) -> Path:
    """<the platform's user data dir>/ldptel/installs/<hash of the ingest token>
    (platformdirs: ~/.local/share on Linux, ~/Library/Application Support on macOS,
    %LOCALAPPDATA% on Windows). The token names the app to the collector, so the state (one
    install identity, ledger, memo, spool) is the same whatever the URL's spelling."""
    digest = hashlib.sha256(b"ldptel-install:" + token.encode()).hexdigest()[:16]
    return platformdirs.user_data_path("ldptel", appauthor=False) / "installs" / digest


def legacy_state_dir(collector_url: str) -> Path:
    """Where SDKs before one state per install kept it: keyed by the URL's spelling."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "ldptel" / xxhash.xxh64_hexdigest(collector_url.rstrip("/").encode())


def migrate_legacy_state(legacy: Path, state_dir: Path) -> None:
    """Bring an older SDK's state_dir for this URL into the install's: moved whole if the
    install has none yet; else its ledger is added to the install's (its spent epsilon stays
    spent) and its unsent reports are spooled there, under their idempotency keys. It is
    then renamed `<name>.migrated`, so it is folded in once and never used again."""
    if not (legacy / statedb.FILENAME).exists() or legacy.resolve() == state_dir.resolve():
        return
    if not (state_dir / statedb.FILENAME).exists():
        state_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if state_dir.exists():
            shutil.rmtree(state_dir)  # an empty leftover: nothing of value in it
        legacy.rename(state_dir)
        LOG.warning("ldptel: moved the state of %s to %s", legacy, state_dir)
        return
    conn = statedb.open_state(state_dir, SCHEMAS, spool.COLUMNS)
    try:
        statedb.open_state(legacy, SCHEMAS, spool.COLUMNS).close()  # brings it to this schema
        statedb.fold(conn, legacy / statedb.FILENAME)
    finally:
        conn.close()
    for cached in (legacy / "configs").glob("*.json"):
        target = state_dir / "configs" / cached.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(cached, target)
    legacy.rename(legacy.with_name(legacy.name + ".migrated"))
    LOG.warning("ldptel: folded the state of %s into %s", legacy, state_dir)
