"""An install's memoization "tree" state, kept in its state database (ldptel.client.tree).

One row per (config and level scope, horizon): the horizon's draws (item, level, change
index) and what the install has seen of its tracked indicator (last value, changes counted,
the window and sign of its sampled change), plus the last window it reported. The row is
read and written inside the report's SQLite transaction, with the ledger's charge and the
spool's append, so a crash leaves either all three or none: a horizon's draws are made once
(a restart never redraws them, which would spend epsilon again) and a change is never
counted twice. Rows of horizons before the current one are deleted when a new one starts.
The draws are never sent beyond what the reports carry (item, level, bits).
"""

from __future__ import annotations

import json
import sqlite3

from ldptel.client.randomness import SecureRandom
from ldptel.client.tree import TreeShape, TreeState
from ldptel.client.tree_wire import wire

SCHEMA = """
CREATE TABLE IF NOT EXISTS tree_installs (
  scope TEXT NOT NULL, horizon INTEGER NOT NULL, item INTEGER NOT NULL,
  level INTEGER NOT NULL, change INTEGER NOT NULL, last INTEGER NOT NULL,
  changes INTEGER NOT NULL, sampled INTEGER NOT NULL, sign INTEGER NOT NULL,
  reported INTEGER NOT NULL, PRIMARY KEY (scope, horizon)
) WITHOUT ROWID;
"""
_COLUMNS = "item, level, change, last, changes, sampled, sign"
_SELECT = f"SELECT {_COLUMNS}, reported FROM tree_installs WHERE scope = ? AND horizon = ?"
_UPSERT = f"INSERT OR REPLACE INTO tree_installs (scope, horizon, {_COLUMNS}, reported) "
_UPSERT += "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


class TreeMemo:
    """One config's (and level's) tree state: `spend` is the report of one window."""

    def __init__(self, shape: TreeShape, window_seconds: int, scope: str) -> None:
        self.shape = shape
        self.window_seconds = window_seconds
        self.scope = scope
        self._rng = SecureRandom()

    def position(self, window: int) -> tuple[int, int]:
        """(horizon, t): the horizon holding a window (its start, unix seconds) and the
        window's index in it, on the campaign's window clock (horizon 0 starts at 0)."""
        return divmod(window // self.window_seconds, self.shape.horizon_windows)

    def spend(self, conn: sqlite3.Connection, value: int, window: int) -> tuple[str, float]:
        """The report of `value` (a label's index) in `window` and what it costs: epsilon for
        the first report of a horizon (all of a horizon's reports together are
        epsilon-LDP), nothing for the others. Inside the caller's transaction."""
        horizon, t = self.position(window)
        row = conn.execute(_SELECT, (self.scope, horizon)).fetchone()
        if row is None:
            state, cost = self.shape.new_state(self._rng), self.shape.epsilon
            conn.execute(
                "DELETE FROM tree_installs WHERE scope = ? AND horizon < ?", (self.scope, horizon)
            )
        else:
            state, cost = TreeState(*(int(x) for x in row[:7])), 0.0
        state = self.shape.observe(state, t, self.shape.indicator(state, value))
        report = self.shape.report(state, t, self._rng)
        conn.execute(
            _UPSERT,
            (
                self.scope,
                horizon,
                *(state.item, state.level, state.change, state.last),
                *(state.changes, state.sampled, state.sign, t),
            ),
        )
        return json.dumps(wire(report), separators=(",", ":")), cost  # as memo.wire_json
