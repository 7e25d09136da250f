"""Personalized privacy in the local model ("Conservative or Liberal? Personalized
Differential Privacy", Jorgensen, Cormode, Yu, ICDE 2015).

A campaign declares named privacy levels, each with an epsilon; every user (through the app)
picks one, and the level travels with the user's reports (it is public by design, as in the
paper: the privacy specification is chosen per user, not per value). Three strategies decide
which epsilon a level's reports are randomized with:

- ``optimal``: each level's own epsilon; the aggregator combines the per-level unbiased
  estimates with inverse-variance weights (`combine`);
- ``minimum``: every level uses the smallest epsilon (the paper's Minimum baseline);
- ``threshold``: levels whose epsilon is below t do not report, the rest use t (Threshold).

`reporting_epsilon` is that rule: the client SDK and the simulation both call it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import InvalidLevelError, ParameterError
from ldptel.client.oracles.base import FrequencyOracle, check_epsilon

LEVEL_NAME = re.compile(r"^[a-z0-9_-]{1,32}$")
MAX_LEVELS = 16
STRATEGIES = ("optimal", "minimum", "threshold")

Vector = NDArray[np.float64]


def check_levels(levels: object) -> dict[str, float]:
    """An untrusted {level name: epsilon} object: at most MAX_LEVELS names of
    [a-z0-9_-]{1,32}, each epsilon finite and > 0. Empty means no levels."""
    if not isinstance(levels, dict):
        raise ParameterError("levels", "must be an object of level name -> epsilon")
    if len(levels) > MAX_LEVELS:
        raise ParameterError("levels", f"at most {MAX_LEVELS} levels, got {len(levels)}")
    checked: dict[str, float] = {}
    for name, epsilon in levels.items():
        if not isinstance(name, str) or not LEVEL_NAME.match(name):
            raise ParameterError("levels", f"level names must match [a-z0-9_-]{{1,32}}: {name!r}")
        checked[name] = check_epsilon(epsilon, f"levels.{name}")
    return checked


def check_strategy(
    strategy: object, threshold: object, levels: Mapping[str, float]
) -> tuple[str, float | None]:
    """The validated (level_strategy, level_threshold) pair for `levels`."""
    if strategy not in STRATEGIES:
        raise ParameterError("level_strategy", f"must be one of {', '.join(STRATEGIES)}")
    assert isinstance(strategy, str)
    if not levels and (strategy != "optimal" or threshold is not None):
        raise ParameterError("level_strategy", "needs privacy levels (the levels field)")
    if strategy != "threshold":
        if threshold is not None:
            raise ParameterError("level_threshold", "is used only by level_strategy threshold")
        return strategy, None
    if threshold is None:
        raise ParameterError("level_threshold", "is required by level_strategy threshold")
    t = check_epsilon(threshold, "level_threshold")
    if t > max(levels.values()):
        raise ParameterError("level_threshold", "is above every level's epsilon: nobody reports")
    return strategy, t


def reporting_epsilon(
    levels: Mapping[str, float], level: str, strategy: str, threshold: float | None
) -> float | None:
    """The epsilon a user at `level` randomizes with under `strategy`; None: does not report.

    Every choice is at most the level's own epsilon, so each user gets at least the privacy
    asked for (Jorgensen et al. 2015, Sec. III: Minimum and Threshold)."""
    if level not in levels:
        known = ", ".join(sorted(levels)) or "none (send no level)"
        raise InvalidLevelError("unknown", f"{level!r} is not a privacy level (known: {known})")
    own = levels[level]
    if strategy == "minimum":
        return min(levels.values())
    if strategy == "threshold":
        assert threshold is not None
        return threshold if own >= threshold else None
    return own


@dataclass(frozen=True)
class LevelPart:
    """One level's share of a window: its oracle, n reports and unbiased count estimate."""

    level: str
    oracle: FrequencyOracle
    n: int
    estimate: Vector


@dataclass(frozen=True)
class Combination:
    """Per-level estimates combined with inverse-variance weights (see `combine`)."""

    parts: tuple[LevelPart, ...]
    #: Per level, per item: the weight of the level's estimated frequency (sums to 1).
    weights: dict[str, Vector]
    estimate: Vector
    #: Variance of `estimate` when every f_v = 0: n^2 / sum_l 1/Var0(f^_l).
    null_variance: Vector

    @property
    def n(self) -> int:
        return sum(part.n for part in self.parts)

    def variance(self, frequencies: Vector | None = None) -> Vector:
        """Exact variance of `estimate` for items of true frequency f_v (None: f_v = 0):
        n^2 sum_l w_l^2 Var_l(c^_l) / n_l^2, the weights being fixed given the n_l."""
        n = self.n
        total = np.zeros_like(self.estimate)
        for part in self.parts:
            weight = self.weights[part.level]
            total += weight**2 * part.oracle.variance(part.n, frequencies) / part.n**2
        result: Vector = n**2 * total
        return result


def combine(parts: Sequence[LevelPart]) -> Combination:
    """The minimum-variance unbiased linear combination of per-level estimates.

    Assumption (the paper's setting): every level's users draw values from the same
    distribution f, so f^_l = c^_l / n_l is unbiased for the same f_v at every level. Among
    sum_l w_l f^_l with sum_l w_l = 1 (unbiased for f_v) the variance sum_l w_l^2 Var(f^_l)
    is smallest for w_l proportional to 1 / Var(f^_l); the estimate of the total count is
    n sum_l w_l f^_l, of variance n^2 / sum_l 1/Var(f^_l). The weights use the f_v-free term
    Var0(f^_l) = Var(c^_l | f_v = 0) / n_l^2, so they do not depend on the data and the
    combination is exactly unbiased; a level with little information (small n_l, small
    epsilon) has a large Var0 and gets a weight near 0. Levels with n_l = 0 are left out.
    """
    used = tuple(part for part in parts if part.n > 0)
    if not used:
        raise ParameterError("n", "no level has any report to combine")
    precisions = [
        part.n**2 / np.asarray(part.oracle.variance(part.n, None), dtype=np.float64)
        for part in used
    ]
    total = np.sum(precisions, axis=0)
    weights = {part.level: p / total for part, p in zip(used, precisions, strict=True)}
    n = sum(part.n for part in used)
    estimate = n * np.sum([weights[p.level] * p.estimate / p.n for p in used], axis=0)
    return Combination(
        parts=used,
        weights=weights,
        estimate=np.asarray(estimate, dtype=np.float64),
        null_variance=np.asarray(n**2 / total, dtype=np.float64),
    )
