"""A report's privacy in plain words: one sentence per number of its privacy section
(aggregator/privacy.py computes the numbers), each naming its adversary, neighbouring
relation and delta (ldptel.client.statements), for every report kind."""

from __future__ import annotations

import math

from ldptel.aggregator.model import Report

TREE_SENTENCE = (
    "Every install's reports of a horizon of {windows} windows were randomized on its device "
    "together at epsilon = {eps:.3g} (memoization tree, local differential privacy): whatever "
    "two value histories of the horizon, its reports are at most e^{eps:.3g} times more "
    "likely under one than under the other."
)


def privacy_sentences(report: Report) -> list[str]:
    """The privacy parameters of a report in plain words: one sentence per number, each
    naming its adversary, neighbouring relation and delta (ldptel.client.statements)."""
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
    if "tree" in report:  # memoization "tree": the bound is over a horizon's reports
        lines[0] = TREE_SENTENCE.format(eps=eps, windows=report["tree"]["horizon_windows"])
    if "local" in privacy:
        lines.append(privacy["local"]["statement"])
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
            f"anonymous multiset of the window's reports (from {users}). " + central["statement"]
        )
    elif central:
        lines.append(central["statement"])
    lifetime = privacy.get("central_lifetime")
    if lifetime and lifetime["applies"]:
        lines.append(lifetime["statement"])
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
