"""A report's privacy: the guarantee in numbers (local, per window, over a user's whole
history, central by shuffling) and the same in plain words, for every report kind."""

from __future__ import annotations

import math

from ldptel.aggregator.model import Longitudinal, Privacy, RapporPrivacy, Report
from ldptel.aggregator.privacy import shuffle_amplification
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.ledger import guarantee
from ldptel.client.oracles.rappor import Rappor


def privacy_section(config: CampaignConfig, oracle: Mechanism, n: int) -> Privacy:
    """Local epsilon, per-user epsilon in the window, and the shuffle-amplified guarantee."""
    per_user = oracle.epsilon * config.reports_per_window
    users = n // config.reports_per_window
    central = shuffle_amplification(per_user, users) if users > 0 else None
    section: Privacy = {
        "local_epsilon": oracle.epsilon,
        "reports_per_window": config.reports_per_window,
        "user_epsilon_per_window": per_user,
        "lifetime_epsilon": config.lifetime_epsilon,
        "central": central,
        "longitudinal": longitudinal(config),
    }
    if isinstance(oracle, Rappor):  # its parameters as used, and the bound over all reports
        section["rappor"] = rappor_privacy(oracle)
        section["permanent_epsilon"] = oracle.permanent_epsilon
    return section


def longitudinal(config: CampaignConfig) -> Longitudinal:
    """The ledger's guarantee over a user's whole history (ldptel.client.ledger.guarantee)."""
    promise = guarantee(config)
    return {
        "memoization": promise.memoization,
        "per_report_epsilon": promise.per_report_epsilon,
        "window_epsilon": promise.window_epsilon,
        "lifetime_epsilon": promise.lifetime_epsilon,
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


def privacy_sentences(report: Report) -> list[str]:
    """The privacy parameters of a report in plain words."""
    privacy = report["privacy"]
    if "levels" in privacy:
        return level_privacy_sentences(report)
    eps = privacy["local_epsilon"]
    lines = [
        f"Every report was randomized on the user's device with the {report['oracle'].upper()} "
        f"oracle at epsilon = {eps:.3g} (local differential privacy): whatever one user's true "
        f"value, any report is at most e^{eps:.3g} = {math.exp(eps):.3g} times more likely "
        "under it than under any other value.",
    ]
    if privacy["reports_per_window"] > 1:
        lines.append(
            f"A user sends at most {privacy['reports_per_window']} reports per window, so a "
            f"user's epsilon in this window is at most {privacy['user_epsilon_per_window']:.3g}."
        )
    if "permanent_epsilon" in privacy:
        rappor = privacy["rappor"]
        lines.append(
            f"RAPPOR (k={rappor['k']}, h={rappor['h']}, m={rappor['m']}, f={rappor['f']:.3g}, "
            f"p={rappor['p']:.3g}, q={rappor['q']:.3g}); permanent bound "
            f"{privacy['permanent_epsilon']:.3g} for the reports of one value under exact "
            "memoization only."
        )
    if "longitudinal" in privacy:
        lines.append("Over a user's whole history: " + privacy["longitudinal"]["statement"])
    central = privacy["central"]
    if central and central["applies"]:
        users = (
            f"{central['n_users']:,} users"
            if privacy["reports_per_window"] == 1
            else f"at least {central['n_users']:,} users"
        )
        lines.append(
            "The collector keeps no identifying metadata, and this report depends only on the "
            f"anonymous multiset of the window's reports (from {users}); by privacy "
            "amplification by shuffling it is also "
            f"({central['epsilon']:.3g}, {central['delta']:.1g})-differentially private in the "
            "central sense (Feldman, McMillan, Talwar 2021)."
        )
    elif central:
        lines.append(f"No amplification by shuffling is claimed: {central['reason']}.")
    return lines


def level_privacy_sentences(report: Report) -> list[str]:
    """The privacy of a report combined over privacy levels, in plain words."""
    combined = report["combined"]
    rows = combined["levels"]
    declared = ", ".join(f"{row['level']} {row['epsilon']:.3g}" for row in rows)
    lines = [
        f"Each user chose a privacy level ({declared}); every report was randomized on the "
        f"user's device with the {report['oracle'].upper()} oracle (local differential "
        "privacy) at an epsilon no larger than its level's."
    ]
    if combined["strategy"] == "minimum":
        lines.append(
            f"Strategy minimum: every level reported at the smallest epsilon, "
            f"{report['epsilon']:.3g}."
        )
    elif combined["strategy"] == "threshold":
        lines.append(
            f"Strategy threshold: levels with epsilon below t = {combined['threshold']:.3g} "
            "did not report; the others reported at epsilon t. Estimates cover the users who "
            "reported."
        )
    weights = ", ".join(f"{row['level']} {row['weight']:.3g}" for row in rows if row["n"])
    if weights:
        lines.append(
            f"The levels' estimates are combined with inverse-variance weights ({weights}), "
            f"assuming {combined['assumption']}."
        )
    amplified = [
        f"{level} ({central['epsilon']:.3g}, {central['delta']:.1g})"
        for level, section in report["privacy"]["levels"].items()
        if (central := section["central"]) and central["applies"]
    ]
    if amplified:
        lines.append(
            "The collector keeps no identifying metadata, so each level's reports reach the "
            "analyst as an anonymous multiset, and a user's data touches only their level's "
            "multiset: by amplification by shuffling (Feldman, McMillan, Talwar 2021) these "
            "levels' users are also centrally (epsilon, delta)-private: "
            f"{', '.join(amplified)}."
        )
    if "longitudinal" in report["privacy"]:
        statement = report["privacy"]["longitudinal"]["statement"]
        lines.append(f"Over a user's whole history: {statement} (budgets scale with the level.)")
    return lines
