"""A campaign's memoization "tree" fields: validated, and their defaults derived once, when
the config is created (served with it, like every derived parameter: docs/protocol.md).

- `horizon_windows` (T): default the windows of one year (365 days of the config's windows,
  at least 1 and at most MAX_HORIZON_WINDOWS): a daily campaign's horizon is 365 windows.
- `max_changes` (K): default DEFAULT_MAX_CHANGES = 2, the first value and one change; an
  install past K changes in a horizon stops reporting its later ones (a bias, stated in every
  report), and the variance grows as K^2 (ldptel.client.tree).

A tree campaign is categorical (a `domain`; a binary one tracks label 1, a larger one a
sampled label per install), reports once per window, declares no privacy levels, and names
oracle "de": each read node's bit is binary randomized response.
"""

from __future__ import annotations

from typing import Any

from ldptel.client.errors import ParameterError
from ldptel.client.tree import MAX_HORIZON_WINDOWS, TreeShape, check_tree

TREE = "tree"
TREE_FIELDS = ("horizon_windows", "max_changes")
#: The default horizon of a tree campaign, in seconds: one year of its windows.
DEFAULT_HORIZON_SECONDS = 365 * 86_400
DEFAULT_MAX_CHANGES = 2
#: A new campaign that declares horizon_windows without a memoization gets "tree" from this
#: horizon up: at T = 128 and a lifetime budget of 10 the tree's window RMSE is 0.38x fresh
#: draws' for stable values and 0.62x with one change, and the gap widens with T (365:
#: 0.16x, 0.28x); at T = 16 fresh draws are 2-9x better (benchmarks/README.md).
TREE_MIN_DEFAULT_HORIZON = 128


def resolve_memoization(data: dict[str, Any], default: str) -> object:
    """The memoization of an untrusted config: as given; else "tree" when it declares a
    horizon of at least TREE_MIN_DEFAULT_HORIZON windows (a shorter one must choose); else
    `default` ("none": configs that declare neither keep their behaviour and ids)."""
    if "memoization" in data:
        return data["memoization"]
    horizon = data.get("horizon_windows")
    if horizon is None:
        return default
    if isinstance(horizon, int) and horizon >= TREE_MIN_DEFAULT_HORIZON:
        return TREE
    raise ParameterError(
        "memoization",
        f"is required with a horizon_windows below {TREE_MIN_DEFAULT_HORIZON} (fresh draws, "
        '"none", are more accurate there; "tree" tracks changes)',
    )


def check_tree_fields(data: dict[str, Any], memoization: object) -> tuple[int | None, int | None]:
    """(horizon_windows, max_changes) of an untrusted config; None where not given (a tree
    config's defaults are written by `tree_defaults`)."""
    given = [name for name in TREE_FIELDS if data.get(name) is not None]
    if memoization != TREE:
        if given:
            raise ParameterError(given[0], 'only a campaign with memoization "tree" has one')
        return None, None
    for absent, reason in (
        ("range", "tracks labels: a numeric campaign cannot use it"),
        ("max_length", "tracks labels: an open-domain campaign cannot use it"),
        ("levels", "declares no privacy levels"),
    ):
        if data.get(absent):
            raise ParameterError(absent, f'memoization "tree" {reason}')
    if data.get("reports_per_window", 1) != 1:
        raise ParameterError("reports_per_window", 'memoization "tree" reports once per window')
    if data["oracle"] != "de":
        raise ParameterError("oracle", 'memoization "tree" randomizes with oracle "de"')
    horizon, changes = data.get("horizon_windows"), data.get("max_changes")
    if horizon is not None and changes is not None:
        return check_tree(horizon, changes)
    if horizon is not None:
        return check_tree(horizon, 1)[0], None
    if changes is not None:
        return None, check_tree(MAX_HORIZON_WINDOWS, changes)[1]
    return None, None


def tree_defaults(window_seconds: int, horizon: int | None, changes: int | None) -> tuple[int, int]:
    """A tree config's horizon and change cap, derived where unwritten (module docstring)."""
    if horizon is None:
        horizon = min(max(DEFAULT_HORIZON_SECONDS // window_seconds, 1), MAX_HORIZON_WINDOWS)
    if changes is None:
        changes = min(DEFAULT_MAX_CHANGES, horizon)
    return check_tree(horizon, changes)


#: What a tree config's guarantee holds for, and what it discloses (guarantee.Guarantee).
TREE_HOLDS_FOR = "any two value histories of a horizon"
TREE_DISCLOSES = (
    "each report's tracked item and tree level (public draws, independent of the values); "
    "when and how often the install reports"
)


def tree_statement(shape: TreeShape, lifetime: float) -> str:
    """The guarantee of a tree config (its `CampaignConfig.tree_shape`) in words."""
    horizons = int(lifetime / shape.epsilon * (1 + 1e-9))
    return (
        f"Per install, between {TREE_HOLDS_FOR} ({shape.horizon_windows} windows): privacy "
        f"loss <= epsilon {shape.epsilon:g} over all its reports in the horizon (Erlingsson "
        f"et al., SODA 2019: one sampled change of at most {shape.max_changes} is "
        f"randomized, every other node is a fair coin), charged once per horizon; horizons "
        f"compose sequentially, <= {lifetime:g} over its lifetime ({horizons} horizons, then "
        f"BUDGET_EXHAUSTED). An install past {shape.max_changes} changes in a horizon has its "
        "later changes not counted: a bias of the estimates, not a privacy loss."
    )
