"""The longitudinal guarantee of a campaign config, and the budgets it rests on: what one
install's reports promise over its whole history, stated once in the kernel so the SDK's
ledger (ldptel.client.ledger, which enforces `Budget`), the aggregator's report documents
and the CLI state the same words and numbers.

Sequential composition is what the budgets add up (Dwork & Roth 2014, Thm. 3.16); the
lifetime figures by optimal composition come from ldptel.client.lifetime.
"""

from __future__ import annotations

from dataclasses import dataclass

from ldptel.client import lifetime as lifetime_budget
from ldptel.client.campaign import CampaignConfig
from ldptel.client.memoization import MEMO_EXACT, MEMO_NONE, MEMO_TREE, NUMERIC_MEMO_REFUSED
from ldptel.client.statements import ENFORCED, LIFETIME_COMPOSED, LIFETIME_PURE, WINDOW, render
from ldptel.client.tree_config import TREE_DISCLOSES, TREE_HOLDS_FOR, tree_statement

#: A campaign without lifetime_epsilon gets this many times its per-report epsilon for life.
DEFAULT_LIFETIME_FACTOR = 10.0


@dataclass(frozen=True)
class Budget:
    """A campaign's limits for one client."""

    reports_per_window: int
    window_epsilon: float
    lifetime_epsilon: float
    #: Set: the lifetime budget is (lifetime_epsilon, lifetime_delta), ldptel.client.lifetime.
    lifetime_delta: float | None = None

    @classmethod
    def of(cls, config: CampaignConfig, epsilon: float | None = None) -> Budget:
        """The config's limits for a client reporting with `epsilon` (a privacy level's
        reporting epsilon; None: the config's). The epsilon budgets scale with epsilon /
        config.epsilon, so every level gets the same number of fresh randomizations and a
        user who asked for a smaller epsilon per report also loses less over a lifetime."""
        scale = 1.0 if epsilon is None else epsilon / config.epsilon
        lifetime = config.lifetime_epsilon
        if lifetime is None:
            lifetime = DEFAULT_LIFETIME_FACTOR * config.epsilon
        return cls(
            reports_per_window=config.reports_per_window,
            window_epsilon=scale * config.epsilon * config.reports_per_window,
            lifetime_epsilon=scale * lifetime,
            lifetime_delta=config.lifetime_delta,
        )


@dataclass(frozen=True)
class Guarantee:
    """What one install's reports to a campaign config promise over its whole history: the
    privacy loss between two value histories, against anyone who sees every report (the
    collector, the network), is at most `window_epsilon` for the reports counted in any one
    window and `lifetime_epsilon` for all of them (delta 0), for the histories `holds_for`
    names; and (`lifetime_composed_epsilon`, `lifetime_delta`) for all of them by optimal
    composition (ldptel.client.lifetime; None under exact memoization). `accountant`: the one
    whose budget the ledger enforces. (With privacy levels the budgets scale with the level's
    epsilon: docs/client.md.)"""

    memoization: str
    per_report_epsilon: float
    window_epsilon: float
    lifetime_epsilon: float
    holds_for: str
    discloses: str
    statement: str
    lifetime_reports: int = 0
    lifetime_composed_epsilon: float | None = None
    lifetime_delta: float | None = None
    accountant: str = lifetime_budget.BASIC


ANY_HISTORIES = "any two value histories"
SAME_PATTERN = "value histories with the same change pattern only"
CHANGE_PATTERN = "the change pattern (which reports carry the same value) is disclosed"


def _no_history_bound(config: CampaignConfig, budget: Budget, per_report: float) -> Guarantee:
    """A numeric config stored with exact memoization (refused since: NUMERIC_MEMO_REFUSED):
    each report alone is per_report-LDP, and no bound over a history is claimed; clients
    refuse to report under it (ldptel.client.configs)."""
    return Guarantee(
        memoization=config.memoization,
        per_report_epsilon=per_report,
        window_epsilon=budget.window_epsilon,
        lifetime_epsilon=budget.lifetime_epsilon,
        holds_for="one report at a time only",
        discloses="which reports repeat discloses how close the values are",
        statement=(
            f"Each report alone is {per_report:g}-LDP; no guarantee over a user's history is "
            f"claimed: {NUMERIC_MEMO_REFUSED}. Clients no longer report under this config."
        ),
    )


def guarantee(config: CampaignConfig, per_report: float | None = None) -> Guarantee:
    """The longitudinal guarantee the ledger enforces for `config` (docs/client.md);
    `per_report`: its mechanism's epsilon, if already built."""
    budget = Budget.of(config)
    per_report = config.build_mechanism().epsilon if per_report is None else per_report
    exact = config.memoization == MEMO_EXACT
    holds_for, discloses = (SAME_PATTERN, CHANGE_PATTERN) if exact else (ANY_HISTORIES, "")
    if exact and config.numeric:  # stored before it was refused: no history bound holds
        return _no_history_bound(config, budget, per_report)
    figures = lifetime_budget.figures(
        per_report,
        budget.lifetime_epsilon,
        budget.lifetime_delta,
        fresh=config.memoization == MEMO_NONE,  # composition needs independent reports
    )
    optimal = figures.accountant == lifetime_budget.OPTIMAL
    window = render(
        WINDOW, reports=budget.reports_per_window, epsilon=budget.window_epsilon,
        holds_for=holds_for,
    )  # fmt: skip
    enforced = {False: ENFORCED, True: ""}  # after the basic sentence, or the optimal one
    sentences = [
        window,
        render(
            LIFETIME_PURE, reports=figures.reports, epsilon=figures.pure_epsilon,
            holds_for=holds_for, enforced=enforced[optimal],
        ),
    ]  # fmt: skip
    if figures.epsilon is not None:
        sentences.append(
            render(
                LIFETIME_COMPOSED, epsilon=figures.epsilon, delta=figures.delta,
                holds_for=holds_for, enforced=enforced[not optimal],
            )
        )  # fmt: skip
    if exact:
        sentences.append(
            f"Memoization {MEMO_EXACT}: {discloses}; each distinct value's first reports are "
            "charged."
        )
    statement = " ".join(sentences)
    if config.memoization == MEMO_TREE:  # client/tree_config.py
        holds_for, discloses = TREE_HOLDS_FOR, TREE_DISCLOSES
        statement = tree_statement(config.tree_shape(), budget.lifetime_epsilon)
    return Guarantee(
        memoization=config.memoization,
        per_report_epsilon=per_report,
        window_epsilon=budget.window_epsilon,
        lifetime_epsilon=figures.pure_epsilon,
        holds_for=holds_for,
        discloses=discloses,
        statement=statement,
        lifetime_reports=figures.reports,
        lifetime_composed_epsilon=figures.epsilon,
        lifetime_delta=figures.delta,
        accountant=figures.accountant,
    )
