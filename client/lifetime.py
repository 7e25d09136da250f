"""The (epsilon, delta) lifetime budget beside the pure one: what the ledger charges when a
campaign declares `lifetime_delta`, and the lifetime figures every guarantee states.

With `lifetime_delta` the ledger keeps, per campaign, how many reports it charged at each
epsilon (`ledger_charges`), and refuses a report once their optimal composition
(ldptel.client.accounting: Kairouz, Oh, Viswanath 2015) would pass (lifetime_epsilon,
lifetime_delta). Under a lifetime of (10, 1e-6) that is 346 reports of epsilon 0.1 where
adding epsilons allows 100; from epsilon 0.5 up it allows no more than adding them does.
Valid because every report is a fresh randomization (memoization "none", which the config
requires with lifetime_delta): the reports are independent given the history.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

from ldptel.client.accounting import composed_epsilon, max_reports
from ldptel.client.errors import BudgetExhaustedError

#: The delta at which a campaign without lifetime_delta also states its composed figure.
STATED_DELTA = 1e-6
#: Relative slack for floating-point comparisons of epsilons (as the ledger's).
_SLACK = 1 + 1e-9

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_charges (
  campaign TEXT NOT NULL, epsilon REAL NOT NULL, reports INTEGER NOT NULL,
  PRIMARY KEY (campaign, epsilon)
) WITHOUT ROWID;
"""
_ADD = """
INSERT INTO ledger_charges VALUES (?, ?, 1)
ON CONFLICT DO UPDATE SET reports = reports + 1
"""
_CHARGES = "SELECT epsilon, reports FROM ledger_charges WHERE campaign = ?"
#: The pure lifetime total of ledger_windows (its LIFETIME row, ldptel.client.ledger).
_PURE = "SELECT epsilon FROM ledger_windows WHERE campaign = ? AND window_start = ?"


def charge(
    conn: sqlite3.Connection, campaign: str, cost: float, budget: tuple[float, float], row: int
) -> None:
    """Record one report of `cost` epsilon (inside the ledger's transaction, after its pure
    lifetime row `row` was charged); raises BudgetExhaustedError if the composition passes
    the budget, (epsilon, delta). Reports charged before the campaign declared a delta (none in
    ledger_charges) count as one mechanism of their summed epsilon: that sum bounds them."""
    epsilon, delta = budget
    if conn.execute(_CHARGES, (campaign,)).fetchone() is None:
        (pure,) = conn.execute(_PURE, (campaign, row)).fetchone() or (cost,)
        if pure - cost > 1e-12:
            conn.execute("INSERT INTO ledger_charges VALUES (?, ?, 1)", (campaign, pure - cost))
    conn.execute(_ADD, (campaign, cost))
    charges = [(float(e), int(k)) for e, k in conn.execute(_CHARGES, (campaign,))]
    if not fits(charges, epsilon, delta):
        reason = f"lifetime budget of (epsilon {epsilon:g}, delta {delta:g}) is spent"
        raise BudgetExhaustedError("lifetime_epsilon", reason)


def fits(charges: list[tuple[float, int]], epsilon: float, delta: float) -> bool:
    """Whether the charges compose within (epsilon, delta); one epsilon: a cached count."""
    if len(charges) == 1:
        per_report, reports = charges[0]
        return reports <= max_reports(per_report, epsilon, delta)
    return composed_epsilon(charges, delta) <= epsilon * _SLACK


@dataclass(frozen=True)
class Figures:
    """What an install's reports amount to over its life: at most `reports` fresh reports
    at `per_report`; `pure_epsilon` by adding them (delta 0), `epsilon` at `delta` by
    optimal composition (None where it does not apply: memoized reports are not fresh)."""

    accountant: str
    reports: int
    pure_epsilon: float
    epsilon: float | None
    delta: float | None


BASIC = "basic composition (Dwork & Roth 2014, Thm. 3.16)"
OPTIMAL = "optimal composition (Kairouz, Oh, Viswanath 2015)"


def figures(
    per_report: float, lifetime_epsilon: float, lifetime_delta: float | None, fresh: bool
) -> Figures:
    """The lifetime figures of the ledger's budget (lifetime_delta None: the pure one)."""
    if lifetime_delta is not None:
        reports = max_reports(per_report, lifetime_epsilon, lifetime_delta)
        composed = composed_epsilon([(per_report, reports)], lifetime_delta)
        return Figures(OPTIMAL, reports, reports * per_report, composed, lifetime_delta)
    reports = math.floor(lifetime_epsilon / per_report * _SLACK)
    if not fresh:
        return Figures(BASIC, reports, lifetime_epsilon, None, None)
    composed = composed_epsilon([(per_report, reports)], STATED_DELTA)
    return Figures(BASIC, reports, lifetime_epsilon, composed, STATED_DELTA)
