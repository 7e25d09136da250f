"""A report's privacy section: the local guarantee, the central one when the collector strips
who sent what (shuffling: the numerical bound of Feldman, McMillan, Talwar, FOCS 2021,
ldptel.client.shuffle, with their Theorem 3.1's closed form beside it), the ledger's
guarantee over an install's life, and the central one over its life (the windows' central
guarantees composed, ldptel.client.accounting). Built here for window reports and for
`ldptel simulate`; every number comes with its sentence (ldptel.client.statements)."""

from __future__ import annotations

from ldptel.aggregator.model import Central, CentralLifetime, Longitudinal, Privacy, RapporPrivacy
from ldptel.client.accounting import composed_epsilon
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.guarantee import Guarantee, guarantee
from ldptel.client.memoization import MEMO_NONE
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.shuffle import closed_form_epsilon, default_delta, shuffled_epsilon
from ldptel.client.statements import CENTRAL, CENTRAL_LIFETIME, CENTRAL_NONE, LOCAL, render

#: A central epsilon is claimed only if it is below this fraction of the local one.
GAIN = 0.99
BOUND = "Feldman, McMillan, Talwar (FOCS 2021), numerical bound (Thm. 3.2)"
ADVERSARY_LOCAL = "the collector and the network"
ADVERSARY_CENTRAL = "readers of the reports"
#: FMT21 prove their bound for datasets of n users that differ in one user's data.
REPLACE_ONE = "replace-one"


def shuffle_amplification(local_epsilon: float, n: int, delta: float | None = None) -> Central:
    """The amplified (epsilon, delta) for n users of an eps0-LDP randomizer, or, when shuffling
    gains nothing at this n, the local epsilon itself with the reason."""
    delta = default_delta(n) if delta is None else delta
    amplified = shuffled_epsilon(local_epsilon, n, delta)
    applies = amplified < GAIN * local_epsilon
    reason = "" if applies else f"shuffling {n:,} users' reports gains less than 1%"
    epsilon = amplified if applies else local_epsilon
    statement = (
        render(CENTRAL, epsilon=epsilon, delta=delta, n=n)
        if applies
        else render(CENTRAL_NONE, reason=reason)
    )
    return {
        "bound": BOUND,
        "local_epsilon": local_epsilon,
        "n_users": n,
        "delta": delta if applies else 0.0,
        "applies": applies,
        "epsilon": epsilon,
        "closed_form_epsilon": closed_form_epsilon(local_epsilon, n, delta),
        "reason": reason,
        "adversary": ADVERSARY_CENTRAL,
        "neighbouring": REPLACE_ONE,
        "statement": statement,
    }


def central_lifetime(central: Central, promise: Guarantee, memoization: str) -> CentralLifetime:
    """An install's reports over every window, for a reader of every window's report: at most
    `lifetime_reports` windows (one report each at least), each at this window's central
    guarantee (`composed_windows`); not with memoization (an install's reports in different
    windows are then not independent)."""
    windows = promise.lifetime_reports
    applies = central["applies"] and memoization == MEMO_NONE and windows > 0
    figure = composed_windows(central["local_epsilon"], central["n_users"], windows, promise)
    epsilon, delta = figure if applies else (None, None)
    statement = (
        render(CENTRAL_LIFETIME, epsilon=epsilon, delta=delta, windows=windows,
               n=central["n_users"])
        if applies
        else ""
    )  # fmt: skip
    return {
        "applies": applies,
        "windows": windows,
        "epsilon": epsilon,
        "delta": delta,
        "n_users": central["n_users"],
        "adversary": ADVERSARY_CENTRAL,
        "neighbouring": REPLACE_ONE,
        "statement": statement,
    }


def composed_windows(
    local_epsilon: float, n: int, windows: int, promise: Guarantee | None = None
) -> tuple[float, float]:
    """(epsilon, delta) of `windows` windows' reports, each of n users at `local_epsilon` per
    user: delta = min(1e-6, 1/(10 n)), half split over the windows' central guarantees and half
    for composing them (ldptel.client.accounting); never more than the ledger's local lifetime
    figure (`promise`), which holds against every observer."""
    delta = default_delta(n)
    each = delta / (2 * max(windows, 1))
    window = shuffled_epsilon(local_epsilon, n, each)
    epsilon = composed_epsilon([(window, windows)], delta, each_delta=each)
    local = None if promise is None else promise.lifetime_composed_epsilon
    if local is not None and promise is not None and (promise.lifetime_delta or 1.0) <= delta:
        epsilon = min(epsilon, local)
    return epsilon, delta


def privacy_section(
    config: CampaignConfig, oracle: Mechanism, n: int, promise: Guarantee | None = None
) -> Privacy:
    """Local epsilon, per-user epsilon in the window, the shuffle-amplified guarantee, the
    ledger's lifetime guarantee (`promise`: guarantee(config) unless given) and the central
    one over an install's life."""
    promise = guarantee(config) if promise is None else promise
    per_user = oracle.epsilon * config.reports_per_window
    users = n // config.reports_per_window
    central = shuffle_amplification(per_user, users) if users > 0 else None
    section: Privacy = {
        "local_epsilon": oracle.epsilon,
        "reports_per_window": config.reports_per_window,
        "user_epsilon_per_window": per_user,
        "lifetime_epsilon": config.lifetime_epsilon,
        "central": central,
        "longitudinal": longitudinal(config, promise),
        "local": {
            "epsilon": oracle.epsilon,
            "delta": 0.0,
            "adversary": ADVERSARY_LOCAL,
            "neighbouring": "any two values of one user",
            "statement": render(LOCAL, epsilon=oracle.epsilon),
        },
    }
    if central is not None:
        section["central_lifetime"] = central_lifetime(central, promise, config.memoization)
    if isinstance(oracle, Rappor):  # its parameters as used, and the bound over all reports
        section["rappor"] = rappor_privacy(oracle)
        section["permanent_epsilon"] = oracle.permanent_epsilon
    return section


def longitudinal(config: CampaignConfig, promise: Guarantee | None = None) -> Longitudinal:
    """The ledger's guarantee over a user's whole history (ldptel.client.guarantee)."""
    promise = guarantee(config) if promise is None else promise
    return {
        "memoization": promise.memoization,
        "per_report_epsilon": promise.per_report_epsilon,
        "window_epsilon": promise.window_epsilon,
        "lifetime_epsilon": promise.lifetime_epsilon,
        "lifetime_reports": promise.lifetime_reports,
        "lifetime_composed_epsilon": promise.lifetime_composed_epsilon,
        "lifetime_delta": promise.lifetime_delta,
        "accountant": promise.accountant,
        "adversary": ADVERSARY_LOCAL,
        "holds_for": promise.holds_for,
        "discloses": promise.discloses,
        "statement": promise.statement,
    }


def rappor_privacy(oracle: Rappor) -> RapporPrivacy:
    """RAPPOR's parameters as used and both of its guarantees."""
    summary = oracle.privacy_summary()
    return {
        "epsilon": summary["epsilon"],
        "permanent_epsilon": summary["permanent_epsilon"],
        "k": summary["k"],
        "h": summary["h"],
        "m": summary["m"],
        "f": summary["f"],
        "p": summary["p"],
        "q": summary["q"],
    }
