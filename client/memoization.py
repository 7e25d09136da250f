"""Memoization modes: how clients reuse randomization across reports (ldptel.client.memo,
docs/client.md "Longitudinal privacy"), and the checks of a config's mode and lifetime delta."""

from __future__ import annotations

from typing import Any

from ldptel.client.errors import ParameterError
from ldptel.client.tree_config import resolve_memoization

#: "none", the default, randomizes every report afresh (a guarantee for arbitrary value
#: histories); "exact_discloses_changes" resends a value's first report, and its promise is
#: weaker: it holds only between histories with the same change pattern, which the reports
#: disclose.
MEMO_NONE = "none"
MEMO_EXACT = "exact_discloses_changes"
#: "tree" tracks changes over a horizon of windows (ldptel.client.tree: Erlingsson et al.,
#: SODA 2019): epsilon once per horizon, between any two value histories.
MEMO_TREE = "tree"
#: Why a numeric campaign cannot memoize: the install's secret rounding point puts nearby
#: values on one grid level, so which reports repeat discloses how close two values are; the
#: loss between histories with the same change pattern is unbounded (2 + ln(range / (K d))
#: for values d apart, pm). Refused until a design with an exact-loss proof replaces it.
NUMERIC_MEMO_REFUSED = (
    f'"{MEMO_EXACT}" is refused for numeric campaigns: which reports repeat discloses how '
    "close the values are (the loss between value histories with the same change pattern "
    'is unbounded); use "none"'
)
MEMOIZATION_MODES = (MEMO_NONE, MEMO_EXACT, MEMO_TREE)


def check_memoization(
    data: dict[str, Any], exact_refused: str | None, stored: bool
) -> tuple[str, float | None]:
    """The memoization mode (exact memoization refused with the kind's reason
    `exact_refused`, unless stored before the refusal) and the lifetime delta it allows."""
    memoization = resolve_memoization(data, MEMO_NONE)
    if memoization not in MEMOIZATION_MODES:
        raise ParameterError("memoization", f"must be one of {', '.join(MEMOIZATION_MODES)}")
    if memoization == MEMO_EXACT and exact_refused and not stored:
        raise ParameterError("memoization", exact_refused)
    return memoization, _check_lifetime_delta(data.get("lifetime_delta"), memoization)


def _check_lifetime_delta(value: object, memoization: str) -> float | None:
    """lifetime_delta: None, or a number in (0, 1) under memoization "none" (optimal
    composition needs every report to be a fresh randomization)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ParameterError("lifetime_delta", "must be null or a number in (0, 1)")
    if memoization != MEMO_NONE:
        raise ParameterError(
            "lifetime_delta", f'needs memoization "{MEMO_NONE}": every report randomized afresh'
        )
    return float(value)
