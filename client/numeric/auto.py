"""`auto` for numeric campaigns: the mean mechanism with the lowest exact worst-case variance.

Candidates are the mean mechanisms (duchi, pm, hm; 1bitmean is duchi's law, sw and dbitflip
are chosen by name for distributions), each built with its defaults for the campaign's
(epsilon, low, high). Each competes on `worst_report_variance()`, the exact maximum over
values of one report's variance (rounding included); the range scales every candidate's
variance alike, so the choice follows epsilon: Duchi below about eps = 0.61 (where HM is
Duchi), HM above (Wang et al., ICDE 2019, Sec. III-C). Ties go to the earlier candidate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ldptel.client.numeric.band import Piecewise
from ldptel.client.numeric.base import NumericMechanism
from ldptel.client.numeric.duchi import Duchi
from ldptel.client.numeric.hm import Hybrid

CANDIDATES: tuple[type[NumericMechanism], ...] = (Duchi, Hybrid, Piecewise)


@dataclass(frozen=True)
class NumericCandidate:
    mechanism: str
    worst_variance: float  # max over values of one report's variance (range's units^2)


@dataclass(frozen=True)
class NumericChoice:
    mechanism: str
    #: The chosen mechanism's fixed and derived parameters, as a config records them.
    params: dict[str, Any]
    epsilon: float
    low: float
    high: float
    reason: str
    candidates: tuple[NumericCandidate, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a campaign config can embed it)."""
        return asdict(self)


def choose_mechanism(
    epsilon: float, low: float, high: float, resolution: int | None = None
) -> NumericChoice:
    """The choice and the numbers behind it (each candidate at `resolution`, or its own
    default grid)."""
    built = [cls(epsilon=epsilon, low=low, high=high, resolution=resolution) for cls in CANDIDATES]
    rows = [NumericCandidate(m.name, m.worst_report_variance()) for m in built]
    best = min(rows, key=lambda row: row.worst_variance)
    others = ", ".join(f"{r.mechanism} {r.worst_variance:.6g}" for r in rows if r is not best)
    reason = (
        f"lowest exact worst-case variance of one report: {best.worst_variance:.6g} "
        f"(others: {others})"
    )
    chosen = built[rows.index(best)]
    return NumericChoice(
        mechanism=best.mechanism,
        params={**chosen.fixed_params(), **chosen.derived_params()},
        epsilon=chosen.requested_epsilon,
        low=chosen.low,
        high=chosen.high,
        reason=reason,
        candidates=tuple(rows),
    )


class AutoNumeric(NumericMechanism):
    """`make_mechanism("auto", ...)` builds the mechanism `choose_mechanism` picks, with its
    defaults; the result carries the explanation as `auto_choice`."""

    name = "auto"

    def __new__(  # type: ignore[misc]
        cls, *, epsilon: float, low: float, high: float, resolution: int | None = None
    ) -> NumericMechanism:
        choice = choose_mechanism(epsilon, low, high, resolution)
        chosen = next(c for c in CANDIDATES if c.name == choice.mechanism)
        mechanism = chosen(epsilon=epsilon, low=low, high=high, **choice.params)
        mechanism.auto_choice = choice  # type: ignore[attr-defined]
        return mechanism


#: The registry entry (abstract, never itself instantiated; calling it builds a mechanism).
AUTO_NUMERIC: type[NumericMechanism] = AutoNumeric  # type: ignore[type-abstract]
