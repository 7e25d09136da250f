"""Every privacy number's sentence, written once: who it holds against (the adversary), between
which inputs (the neighbouring relation) and with which delta, for n users where delta depends
on it. guarantee(), every report and `ldptel simulate` / `ldptel budget` say these words, and
docs/client.md and docs/aggregator.md quote the templates (tests/client/test_statements.py).

Two adversaries: the collector and the network see every report with its arrival (the local
guarantees); readers of the reports (analysts, the reports API, the dashboard) see only
estimates computed from the anonymous multiset of a window's reports (the central ones).
"""

from __future__ import annotations

#: One report (local differential privacy).
LOCAL = (
    "Against the collector and the network, who see every report: each report is "
    "{epsilon}-differentially private (delta 0) between any two values of one user."
)
#: An install's reports in one window (sequential composition).
WINDOW = (
    "Against the collector and the network: an install's reports in any one window (at most "
    "{reports}) are together {epsilon}-differentially private (delta 0) between {holds_for}."
)
#: An install's whole life, by adding epsilons.
LIFETIME_PURE = (
    "Against the collector and the network: all of an install's reports to the campaign (at "
    "most {reports} fresh randomizations) are together {epsilon}-differentially private "
    "(delta 0) between {holds_for}{enforced}."
)
#: The same reports, by optimal composition.
LIFETIME_COMPOSED = (
    "Against the same observers, the same reports are together ({epsilon}, {delta})-"
    "differentially private between {holds_for} (optimal composition, Kairouz, Oh, Viswanath "
    "2015){enforced}; this delta is per install whatever the number n of installs, so it "
    "should stay well below 1/n."
)
#: A window's report (amplification by shuffling).
CENTRAL = (
    "Against readers of the reports, who see only the anonymous multiset of the window's "
    "reports: this report is ({epsilon}, {delta})-differentially private, for n = {n} users "
    "(delta at most 1/(10 n)), between windows that differ in one user's data (replace-one: "
    "not adding or removing a user, as n is published) (amplification by shuffling, Feldman, "
    "McMillan, Talwar 2021)."
)
CENTRAL_NONE = (
    "Against readers of the reports: no amplification by shuffling is claimed ({reason}); the "
    "local guarantee holds."
)
#: Every window's report an install contributes to (composition of the central guarantees).
CENTRAL_LIFETIME = (
    "Against readers of every window's report: all of an install's reports are together "
    "({epsilon}, {delta})-differentially private between histories that differ in one "
    "install's data (replace-one), if each of the at most {windows} windows it reports in has "
    "at least n = {n} users (composition of the windows' central guarantees)."
)
#: Said after whichever lifetime sentence the ledger enforces.
ENFORCED = " (the ledger refuses reports beyond it)"


def render(template: str, **numbers: object) -> str:
    """The template with its numbers: floats to 3 significant digits, ints with separators."""
    return template.format(**{key: _number(value) for key, value in numbers.items()})


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3g}"
