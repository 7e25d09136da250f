"""`auto` for breakdowns: the mechanism whose two-way marginal cells have the smallest exact
variance, compared per (attributes, sizes, epsilon) and recorded with the reason.

The comparison: the mean over every two-way marginal's cells of the exact variance (each
mechanism's `exact_variance`) when the attributes are independent and uniform, at n users
(every candidate's variance is ~linear in n, so the choice hardly depends on it). Candidates:
every mechanism of BREAKDOWNS, `joint` only up to JOINT_MAX_CELLS joint cells. What decides
(docs/breakdowns.md, "When auto picks each"): `joint` wins at high epsilon while the joint
domain is small (each user's whole row at full epsilon); `hadamard` at low epsilon (one bit
of randomized response a user, its variance set by the number of coefficients rather than by
a domain); `pairs` in between and once the joint domain is large; `split` (epsilon / k per
attribute, a two-way cell a product of two noisy estimates) loses in every case we computed
but stays a candidate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldptel.client.multi.attributes import MAX_JOINT, Attributes
from ldptel.client.multi.catalog import BREAKDOWNS
from ldptel.client.multi.mechanisms import Breakdown

#: Above this many joint cells an OUE report (one bit a cell) exceeds 4 KiB: `joint` is not
#: a candidate there (nor above the oracles' largest domain, MAX_JOINT).
JOINT_MAX_CELLS = 32768
NOMINAL_USERS = 100_000


@dataclass(frozen=True)
class Choice:
    """The chosen mechanism, why, and every candidate's mean two-way cell variance."""

    mechanism: str
    reason: str
    variances: dict[str, float]


def mean_pair_variance(mechanism: Breakdown, n: int = NOMINAL_USERS) -> float:
    """Mean exact variance of the two-way cells' counts for independent uniform attributes."""
    sizes = mechanism.attributes.sizes
    total, cells = 0.0, 0
    for a, b in mechanism.attributes.pairs:
        count = sizes[a] * sizes[b]
        f = np.full(count, 1.0 / count)
        total += float(mechanism.exact_variance(n, (a, b), f).sum())
        cells += count
    return total / cells


def choose_breakdown(
    epsilon: float, attributes: Attributes, n: int = NOMINAL_USERS
) -> tuple[Breakdown, Choice]:
    variances: dict[str, float] = {}
    built: dict[str, Breakdown] = {}
    for name, cls in BREAKDOWNS.items():
        if name == "joint" and attributes.joint_size > min(JOINT_MAX_CELLS, MAX_JOINT):
            continue
        built[name] = cls(epsilon=epsilon, attributes=attributes)
        variances[name] = mean_pair_variance(built[name], n)
    best = min(variances, key=lambda name: variances[name])
    inners = built[best].inner_names
    others = ", ".join(
        f"{k} {v:.4g} (x{v / variances[best]:.2f})" for k, v in variances.items() if k != best
    )
    skipped = "" if "joint" in variances else f"; joint not offered above {JOINT_MAX_CELLS} cells"
    reason = (
        f"{best} ({'/'.join(inners)}): smallest mean two-way cell variance "
        f"{variances[best]:.4g} at n={n} for sizes {'x'.join(map(str, attributes.sizes))}, "
        f"epsilon {epsilon:g} (against {others or 'no other candidate'}{skipped})"
    )
    return built[best], Choice(best, reason, variances)
