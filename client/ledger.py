"""The privacy ledger: how much epsilon this client has spent per campaign, per window and
over its lifetime, persisted in the state database and checked before every report.

Sequential composition is what it adds up (Dwork & Roth 2014, Thm. 3.16: the losses of
reports on independent randomness add). Under the default memoization "none" every report is
a fresh draw charged its epsilon, so the total bounds the loss between any two value
histories (ldptel.client.guarantee states it); under the opt-in "exact_discloses_changes" a
resent report costs nothing and the total holds only between histories with the same change
pattern (ldptel.client.memo). A per-window budget alone renews forever and so is unbounded over time
(Tang et al., 2017, on Apple's deployment); the lifetime budget is not. Windows are the
collector's (ldptel.client.clock): a spooled report is posted only in the window it is
charged to, or charged again to the window it is posted in (`carry`). With privacy levels a
report costs its level's reporting epsilon, and the budgets checked are those of the level it
is made at (`Budget.of`); the totals stay per campaign, across levels.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from ldptel.client import lifetime as lifetime_budget
from ldptel.client.errors import BudgetExhaustedError
from ldptel.client.guarantee import Budget

#: Relative slack for floating-point sums of epsilons (never enough to matter for privacy).
_SLACK = 1 + 1e-9
#: Window rows are kept this long after their window ended (the lifetime row stays forever).
KEEP_WINDOWS_SECONDS = 7 * 86_400

#: The window_start of a campaign's lifetime total. Its row sorts after every real window of the
#: campaign, next to the current window's row, so charging both writes one page: each page a
#: commit writes costs report() two write() calls (benchmarks/README.md). Its window_end is
#: the same (never pruned) and its reports column is unused (0).
LIFETIME = 2**62

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_windows (
  campaign TEXT NOT NULL, window_start INTEGER NOT NULL, window_end INTEGER NOT NULL,
  reports INTEGER NOT NULL, epsilon REAL NOT NULL, PRIMARY KEY (campaign, window_start)
) WITHOUT ROWID;
"""

#: The common case: a plain UPDATE adds the report to its row if the row exists and stays
#: within its limits (an UPSERT ... RETURNING costs twice as much). When it changes nothing,
#: _UPSERT charges it anyway, creating the row or telling which limit it passes.
_ADD = """
UPDATE ledger_windows SET reports = reports + ?1, epsilon = epsilon + ?2
WHERE campaign = ?3 AND window_start = ?4 AND reports + ?1 <= ?5 AND epsilon + ?2 <= ?6
"""
_UPSERT = """
INSERT INTO ledger_windows VALUES (?, ?, ?, ?, ?)
ON CONFLICT DO UPDATE SET
  reports = reports + excluded.reports, epsilon = epsilon + excluded.epsilon
RETURNING reports, epsilon
"""
_SPENT = "SELECT window_start, reports, epsilon FROM ledger_windows WHERE campaign = ? AND "
_SPENT += f"window_start IN (?, {LIFETIME})"


def charge(
    conn: sqlite3.Connection,
    campaign: str,
    window: int,
    window_seconds: int,
    cost: float,
    budget: Budget,
    *,
    lifetime: bool = True,
) -> None:
    """Record one report costing `cost` epsilon, inside the caller's write transaction;
    raises BudgetExhaustedError (the caller rolls back) if any limit would be passed.
    `lifetime=False`: a report already charged for life moves into another window."""
    window_cap = budget.window_epsilon * _SLACK if cost > 0.0 else math.inf  # a resent memo
    limits = (budget.reports_per_window, window_cap)
    if not conn.execute(_ADD, (1, cost, campaign, window, *limits)).rowcount:
        end = window + window_seconds
        reports, spent = conn.execute(_UPSERT, (campaign, window, end, 1, cost)).fetchone()
        if reports > budget.reports_per_window:
            raise BudgetExhaustedError(
                "window_reports", f"at most {budget.reports_per_window} reports per window"
            )
        if spent > window_cap:
            raise BudgetExhaustedError(
                "window_epsilon", f"window budget of epsilon {budget.window_epsilon:g} is spent"
            )
    if cost <= 0.0 or not lifetime:
        return
    delta = budget.lifetime_delta  # set: the accountant decides, after the sum
    lifetime_cap = math.inf if delta is not None else budget.lifetime_epsilon * _SLACK
    if not conn.execute(_ADD, (0, cost, campaign, LIFETIME, 0, lifetime_cap)).rowcount:
        _, lifetime = conn.execute(_UPSERT, (campaign, LIFETIME, LIFETIME, 0, cost)).fetchone()
        if lifetime > lifetime_cap:
            reason = f"lifetime budget of epsilon {budget.lifetime_epsilon:g} is spent"
            raise BudgetExhaustedError("lifetime_epsilon", reason)
    if delta is not None:
        lifetime_budget.charge(conn, campaign, cost, (budget.lifetime_epsilon, delta), LIFETIME)


@dataclass(frozen=True)
class Spent:
    """What a client has spent on a campaign: in one window, and for life."""

    window_reports: int
    window_epsilon: float
    lifetime_epsilon: float


def spent(conn: sqlite3.Connection, campaign: str, window: int) -> Spent:
    found = Spent(0, 0.0, 0.0)
    for start, reports, epsilon in conn.execute(_SPENT, (campaign, window)):
        if start == LIFETIME:
            found = replace(found, lifetime_epsilon=float(epsilon))
        else:
            found = replace(found, window_reports=int(reports), window_epsilon=float(epsilon))
    return found


def migrate(conn: sqlite3.Connection) -> None:
    """Move the lifetime totals of a state_dir from before LIFETIME rows (a table of their
    own) into ledger_windows (inside the caller's write transaction: once, whoever opens it)."""
    old = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_lifetime'"
    if conn.execute(old).fetchone() is None:
        return
    conn.execute(
        "INSERT INTO ledger_windows SELECT campaign, ?1, ?1, 0, epsilon FROM ledger_lifetime "
        "WHERE true ON CONFLICT DO UPDATE SET epsilon = epsilon + excluded.epsilon",
        (LIFETIME,),
    )
    conn.execute("DROP TABLE ledger_lifetime")


def prune(conn: sqlite3.Connection, now: float) -> None:
    """Forget window rows long past (the lifetime totals are kept). `now` is the collector's
    time as the client knows it from an answer (ldptel.client.clock), never the device's: a
    device clock set weeks ahead would delete the current window's row, and the next report
    would be charged as if the window were empty."""
    conn.execute("DELETE FROM ledger_windows WHERE window_end < ?", (now - KEEP_WINDOWS_SECONDS,))


@dataclass(frozen=True)
class WindowRule:
    """How the sender may post a (campaign, level)'s reports now: the collector's current
    window, whether it is far enough from its end for a post to land in it, how many
    seconds until the next window starts, and what moving a report into the current window
    costs (the level's reporting epsilon) against which budget."""

    window: int
    window_seconds: int
    postable: bool
    next_window_in: float
    cost: float
    budget: Budget


def _move(conn: sqlite3.Connection, campaign: str, rule: WindowRule, reports: int) -> bool:
    """Charge `reports` reports to the rule's window (not for life: they were), or nothing."""
    conn.execute("SAVEPOINT move")
    try:
        for _ in range(reports):
            charge(
                conn,
                campaign,
                rule.window,
                rule.window_seconds,
                rule.cost,
                rule.budget,
                lifetime=False,
            )
    except BudgetExhaustedError:
        conn.execute("ROLLBACK TO move")
        return False
    finally:
        conn.execute("RELEASE move")
    return True


#: A rule_of answer for a campaign whose reports the collector will refuse (retired): they
#: are posted as they are, to be dead-lettered, never stored or counted.
REFUSED: Literal["refused"] = "refused"


def settle(
    conn: sqlite3.Connection,
    now: float,
    rule_of: Callable[[str, str], WindowRule | Literal["refused"] | None],
) -> None:
    """(Sender, inside its write transaction, before forming a batch; `now` the device time
    batches are timed by) Make every report the sender may post counted in the window it
    was charged to, on the collector's clock: a report charged to another window (made
    offline, or under a wrong device clock) is charged to the current window if it has room,
    else held (not batched) until a window has; a formed batch not yet delivered likewise,
    or it waits for the next window. Nothing is posted within the rule's margin of a
    window's end (it could arrive in the next). `rule_of(campaign, level)` None: hold them."""
    conn.execute("UPDATE spool SET held = 0 WHERE held")
    where = "batch IS NULL AND campaign = ? AND level = ?"
    groups = conn.execute("SELECT DISTINCT campaign, level FROM spool WHERE batch IS NULL")
    for campaign, level in groups.fetchall():
        rule = rule_of(campaign, level)
        if rule == REFUSED:
            continue
        if not isinstance(rule, WindowRule) or not rule.postable:
            conn.execute(f"UPDATE spool SET held = 1 WHERE {where}", (campaign, level))
            continue
        others = conn.execute(
            f"SELECT id FROM spool WHERE {where} AND window_start != ? ORDER BY id",
            (campaign, level, rule.window),
        ).fetchall()
        for (row,) in others:
            if _move(conn, campaign, rule, 1):
                conn.execute("UPDATE spool SET window_start = ? WHERE id = ?", (rule.window, row))
            else:
                conn.execute("UPDATE spool SET held = 1 WHERE id = ?", (row,))
    batches = conn.execute("SELECT id, campaign, level FROM batches").fetchall()
    for batch, campaign, level in batches:
        rule = rule_of(campaign, level)
        if not isinstance(rule, WindowRule):
            continue
        (others,) = conn.execute(
            "SELECT count(*) FROM spool WHERE batch = ? AND window_start != ?",
            (batch, rule.window),
        ).fetchone()
        if rule.postable and (not others or _move(conn, campaign, rule, int(others))):
            conn.execute("UPDATE spool SET window_start = ? WHERE batch = ?", (rule.window, batch))
        else:
            later = now + rule.next_window_in
            conn.execute(
                "UPDATE batches SET next_at = max(next_at, ?) WHERE id = ?", (later, batch)
            )
