"""The contract every numeric mechanism keeps (mean and distribution of numbers under LDP).

A numeric campaign declares a range [low, high]. The client clips its value into the range
(`clip`: below low counts as low, above high as high, NaN is refused), so every estimate is
of the clipped values. A mechanism then works on a grid of K + 1 levels over the range
(K = `resolution`; level s is low + s (high - low) / K, see `levels`):

1. Rounding (`round_levels`): the clipped value, at position p = s + f between levels s and
   s + 1, becomes level s + 1 with probability f and s otherwise (alpha-point rounding, Ding,
   Kulkarni, Yekhanin, NeurIPS 2017, Sec. 3: up iff alpha < f for a uniform alpha). So the
   expected level is the value itself. Each report draws a fresh alpha (`round_to_grid`); for
   repeated collection the SDK may keep one alpha per campaign (then the level changes only
   when the value crosses a threshold, and a memoized report per level can be reused).
2. The private law (`perturb_levels`): each output has an exact integer weight given the
   level, drawn from uniform integers (client/samplers.py); no float is sampled, so no low
   bits of a continuous draw can leak the value (Mironov, CCS 2012).

Privacy (a theorem for every mechanism here). Protected: the reporting user's value. Against:
anyone who sees the report (network, collector, aggregator, anyone reading the store).
Neighbouring inputs: any two values x, x' (local DP). Claim: P(y | x) <= e^epsilon P(y | x')
for every output y, with `epsilon` the loss of the law actually sampled (computed from its
integer weights; at most the requested epsilon). Proof: P(y | x) = sum_s P(s | x) P(y | s) is
a mixture over levels, so P(y | x) <= max_s P(y | s) <= e^eps min_s' P(y | s') <= e^eps
P(y | x'), given P(y | s) <= e^eps P(y | s') for all levels s, s' -- which the exact audit
(ldptel.analysis.numeric) checks on the mechanism's probabilities, and the sampled audit on
reports drawn by `perturb_levels`. Rounding is input-dependent but pre-privacy: it never
weakens the bound.

Estimates. A report's output y has an unbiased value (its estimate of the level, in the
range's units); `mean(support, n)` adds them, so it is unbiased for the mean of the clipped
values (up to the float rounding of the input's position, ~1e-16 relative). The exact
variance of one report is the mixture's: E[y^2 | x] = (1 - f) E[y^2 | s] + f E[y^2 | s + 1],
minus x^2 (`report_variance`); `mean_variance(n)` is its worst case over x / n, or the exact
value for given true values. `mean_variance_estimate(support, n)` estimates it from the
reports alone (conservative: it includes the spread of the true values). Distribution
mechanisms (`estimates_distribution`) also give `distribution(support, n)`: estimated
probabilities of the levels (a histogram with buckets around the levels), CDF and quantiles.

Storage and wire: what every layer needs of a mechanism is `ReportMechanism`
(client/oracles/base.py), the base the frequency oracles extend too: `fields`, `encode`,
`decode`, `pack`, `unpack`, and `support(batch)`, an int64 vector whose batches add, so the
aggregator's window state stays exact integer counts.
"""

from __future__ import annotations

import functools
import math
import secrets
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import (
    SERVED_ABSOLUTE_SLACK,
    SERVED_RELATIVE_SLACK,
    ReportBatch,
    ReportMechanism,
    WireReport,
    check_int,
    check_report_epsilon,
)
from ldptel.client.randomness import Rng, SecureRandom, default_rng
from ldptel.client.samplers import uniform_words
from ldptel.client.simplex import norm_sub

#: Largest grid: levels travel and are stored as unsigned 32-bit integers.
MAX_RESOLUTION = 2**20
#: 2^64, the scale of an alpha drawn as a uniform 64-bit word.
_ALPHA_SCALE = 2**64


def check_range(low: object, high: object) -> tuple[float, float]:
    """A campaign's range: finite numbers with low < high."""
    bounds = []
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)):
            raise ParameterError(name, f"must be a number, got {type(bound).__name__}")
        if not math.isfinite(float(bound)):
            raise ParameterError(name, f"must be finite, got {bound!r}")
        bounds.append(float(bound))
    if not bounds[0] < bounds[1]:
        raise ParameterError("high", f"must be > low = {bounds[0]!r}, got {bounds[1]!r}")
    if not math.isfinite(bounds[1] - bounds[0]):
        raise ParameterError("high", "high - low must be finite")
    return bounds[0], bounds[1]


def clip_values(values: ArrayLike, low: float, high: float) -> NDArray[np.float64]:
    """Values clipped into [low, high] (infinities clip to the ends; NaN is refused)."""
    array = np.asarray(values, dtype=np.float64)
    if np.isnan(array).any():
        raise ParameterError("value", "must be a number, got NaN")
    clipped: NDArray[np.float64] = np.clip(array, low, high)
    return clipped


def grid_positions(
    values: ArrayLike, low: float, high: float, resolution: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Each clipped value's position on the grid of K = resolution steps over [low, high]:
    (level s below it, fraction f in [0, 1] towards s + 1)."""
    scaled = (clip_values(values, low, high) - low) / (high - low) * resolution
    scaled = np.clip(scaled, 0.0, float(resolution))
    below = np.minimum(np.floor(scaled), resolution - 1).astype(np.int64)
    return below, scaled - below


def alpha_point_levels(
    values: ArrayLike, alpha: ArrayLike, low: float, high: float, resolution: int
) -> NDArray[np.int64]:
    """Alpha-point rounding (Ding, Kulkarni, Yekhanin, NeurIPS 2017, Sec. 3) of each value to
    a level 0..K: with alpha a 64-bit integer (alpha / 2^64 uniform on [0, 1) when drawn
    uniformly), level s + 1 iff alpha / 2^64 < f, i.e. alpha < ceil(f 2^64). Exact: f 2^64 is
    an integer for f >= 2^-11, and below that P(up) exceeds f by < 2^-64. A fresh alpha per
    report makes the rounding unbiased; one alpha kept per client (`draw_alpha`) makes the
    level change only when the value crosses a threshold (repeated collection)."""
    below, fraction = grid_positions(values, low, high, resolution)
    scaled = np.ceil(np.ldexp(fraction, 64))
    # f = 1 (the top of the range) always rounds up; 2^64 does not fit a uint64.
    whole = scaled >= _ALPHA_SCALE
    threshold = np.where(whole, 0.0, scaled).astype(np.uint64)
    up = whole | (np.asarray(alpha, dtype=np.uint64) < threshold)
    levels: NDArray[np.int64] = below + up
    return levels


def alpha_point_level(value: float, alpha: int, low: float, high: float, resolution: int) -> int:
    """`alpha_point_levels` for one value in Python floats and integers (the SDK's scalar
    path; the same IEEE operations, so the same level for the same alpha)."""
    if math.isnan(value):
        raise ParameterError("value", "must be a number, got NaN")
    clipped = min(max(value, low), high)
    scaled = min(max((clipped - low) / (high - low) * resolution, 0.0), float(resolution))
    below = min(math.floor(scaled), resolution - 1)
    return below + (alpha < math.ceil(math.ldexp(scaled - below, 64)))


def draw_alpha() -> int:
    """One alpha for `alpha_point_levels`, uniform on [0, 2^64), from the OS CSPRNG."""
    return secrets.randbits(64)


@dataclass(frozen=True)
class Distribution:
    """An estimated distribution of the (clipped, rounded) values over the grid's levels.

    `probabilities[i]` estimates the fraction of values at level `points[i]`; bucket i is
    [edges[i], edges[i + 1]) (edges halfway between levels, the range's ends outside).
    `probabilities` are made consistent (>= 0, sum 1: Norm-Sub, Wang et al., NDSS 2020);
    `raw` are the estimator's own values (unbiased for the sw/dbitflip estimators that are).
    """

    points: NDArray[np.float64]
    edges: NDArray[np.float64]
    probabilities: NDArray[np.float64]
    raw: NDArray[np.float64]

    @classmethod
    def on_levels(cls, points: NDArray[np.float64], raw: NDArray[np.float64]) -> Distribution:
        """Buckets halfway between the levels, probabilities made consistent from `raw`."""
        edges = np.concatenate(([points[0]], (points[:-1] + points[1:]) / 2, [points[-1]]))
        return cls(points=points, edges=edges, probabilities=norm_sub(raw, 1.0), raw=raw)

    @property
    def cdf(self) -> NDArray[np.float64]:
        """Estimated P(value <= points[i])."""
        return np.minimum(np.cumsum(self.probabilities), 1.0)

    def quantile(self, q: float) -> float:
        """The q-quantile, interpolated linearly within the bucket where the CDF crosses q."""
        if not 0.0 <= q <= 1.0:
            raise ParameterError("q", f"must be in [0, 1], got {q!r}")
        upper = np.concatenate(([0.0], np.cumsum(self.probabilities)))
        return float(np.interp(q, upper, self.edges))


class NumericMechanism(ReportMechanism):
    """An LDP mechanism for numbers in [low, high] (see the module docstring).

    Constructed `Mech(epsilon=..., low=..., high=..., **params)`; subclasses validate their
    parameters in `__init__` (keyword-only) and implement the private law on levels
    (`perturb_levels`), the wire form (`encode`, `decode`), `support`, `mean`,
    `level_variance`, `mean_variance_estimate` and the audit hooks.
    """

    #: True for the mechanisms whose reports estimate a distribution (sw, dbitflip).
    estimates_distribution: ClassVar[bool] = False
    #: K when the config does not give one.
    default_resolution: ClassVar[int] = 256

    def __init__(
        self, *, epsilon: float, low: float, high: float, resolution: int | None = None
    ) -> None:
        self.requested_epsilon = check_report_epsilon(epsilon)
        self.low, self.high = check_range(low, high)
        self.resolution = check_int(
            self.default_resolution if resolution is None else resolution,
            "resolution",
            1,
            MAX_RESOLUTION,
        )

    def fixed_params(self) -> dict[str, Any]:
        return {"resolution": self.resolution}

    #: The parameters whose integers set `epsilon` (in the order a refusal names them).
    guarantee_params: ClassVar[tuple[str, ...]] = ()

    def check_guarantee(self, given: Mapping[str, Any]) -> None:
        """A config's explicit `params` must not guarantee less than its epsilon: the loss of
        the law they give (`epsilon`, exact from the integers) is at most the requested one,
        up to the derivation's rounding (SERVED_*_SLACK). Raises ParameterError naming
        `params.<field>` and the epsilon the integers give (docs/numeric.md)."""
        allowed = self.requested_epsilon * (1 + SERVED_RELATIVE_SLACK) + SERVED_ABSOLUTE_SLACK
        if self.epsilon <= allowed:
            return
        named = [name for name in self.guarantee_params if name in given]
        values = ", ".join(f"{name}={given[name]!r}" for name in named)
        raise ParameterError(
            f"params.{named[0]}" if named else "epsilon",
            f"{self.name} with {values or 'these parameters'} gives epsilon "
            f"{self.epsilon:.6g} per report, above the config's {self.requested_epsilon:g}",
        )

    # -- privacy ---------------------------------------------------------------------------
    @property
    @abstractmethod
    def epsilon(self) -> float:
        """The epsilon the law actually sampled guarantees for one report (<= requested)."""

    # -- the grid --------------------------------------------------------------------------
    @property
    def domain_size(self) -> int:
        """The number of levels, the private law's input domain (what the audit ranges over)."""
        return self.resolution + 1

    @property
    def levels(self) -> NDArray[np.float64]:
        """The grid's levels in the range's units: low + s (high - low) / K, s = 0..K."""
        return self.level_value(np.arange(self.resolution + 1, dtype=np.float64))

    def level_value(self, position: NDArray[np.float64]) -> NDArray[np.float64]:
        """A position on the grid (0..K, fractional allowed) in the range's units."""
        values: NDArray[np.float64] = self.low + (self.high - self.low) * (
            position / self.resolution
        )
        return values

    def clip(self, values: ArrayLike) -> NDArray[np.float64]:
        """The values clipped into [low, high] (infinities clip to the ends; NaN is refused)."""
        return clip_values(values, self.low, self.high)

    def positions(self, values: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Each clipped value as (level s below it, fraction f in [0, 1] towards s + 1)."""
        return grid_positions(values, self.low, self.high, self.resolution)

    def round_levels(self, values: ArrayLike, alpha: ArrayLike) -> NDArray[np.int64]:
        """Each value's level by alpha-point rounding (`alpha_point_levels`)."""
        return alpha_point_levels(values, alpha, self.low, self.high, self.resolution)

    def round_to_grid(self, values: ArrayLike, rng: Rng) -> NDArray[np.int64]:
        """Unbiased random rounding of each value to a level, with a fresh alpha each."""
        array = np.atleast_1d(np.asarray(values, dtype=np.float64))
        return self.round_levels(array, uniform_words(rng, array.size))

    # -- client ----------------------------------------------------------------------------
    @abstractmethod
    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        """The private law: one report of each level in 0..K, independently."""

    def perturb_batch(self, values: ArrayLike, rng: Rng) -> ReportBatch:
        """Clip, round and randomize each value independently."""
        return self.perturb_levels(self.round_to_grid(values, rng), rng)

    def perturb(self, value: float, rng: Rng | None = None) -> WireReport:
        """One report of `value` in its wire form. From the OS CSPRNG by default, through
        `perturb_level_one` (the SDK's path); another source goes through `perturb_batch`."""
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ParameterError("value", f"must be a number, got {type(value).__name__}")
        if rng is None or isinstance(rng, SecureRandom):
            alpha = draw_alpha()
            level = alpha_point_level(float(value), alpha, self.low, self.high, self.resolution)
            return self.perturb_level_one(level)
        return self.encode(self.perturb_batch(np.array([float(value)]), rng))[0]

    def perturb_level_one(self, level: int) -> WireReport:
        """One report of a level from the OS CSPRNG. Mechanisms whose batch path is mostly
        numpy's per-call overhead for one report override it with scalar draws of the same
        exact law."""
        return self.encode(self.perturb_levels(np.array([level]), default_rng()))[0]

    # -- aggregator ------------------------------------------------------------------------
    @abstractmethod
    def mean(self, support: NDArray[np.int64], n: int) -> float:
        """Unbiased estimate of the mean of the n reports' clipped values."""

    @abstractmethod
    def level_variance(self) -> NDArray[np.float64]:
        """Exact Var(report's value | level s) for s = 0..K, in the range's units squared."""

    @abstractmethod
    def mean_variance_estimate(self, support: NDArray[np.int64], n: int) -> float:
        """An estimate of Var(mean) from the reports alone (for standard errors and CIs)."""

    def distribution(self, support: NDArray[np.int64], n: int) -> Distribution:
        """The estimated distribution of the values (distribution mechanisms only)."""
        raise ParameterError("oracle", f"{self.name} estimates the mean only")

    def report_variance(self, values: ArrayLike) -> NDArray[np.float64]:
        """Exact variance of one report's value for each true value (rounding included)."""
        below, fraction = self.positions(values)
        second = self._second_moments
        mixed = (1 - fraction) * second[below] + fraction * second[below + 1]
        x = self.level_value(below + fraction)
        result: NDArray[np.float64] = np.maximum(mixed - x * x, 0.0)
        return result

    def worst_report_variance(self) -> float:
        """max over values x of `report_variance(x)` (computed once per mechanism)."""
        return self._worst_report_variance

    @functools.cached_property
    def _worst_report_variance(self) -> float:
        """On each segment between two levels the variance is a concave quadratic in the
        fraction f, so its maximum is at the stationary point f* = (slope of E[y^2] / (2 dx)
        - x_s) / dx, clipped to [0, 1]."""
        second = self._second_moments
        x = self.levels
        dx = (self.high - self.low) / self.resolution
        slope = np.diff(second)
        stationary = np.clip((slope / (2 * dx) - x[:-1]) / dx, 0.0, 1.0)
        candidates = np.concatenate((stationary, [0.0, 1.0]))
        below = np.concatenate((np.arange(self.resolution), [0, self.resolution - 1]))
        mixed = (1 - candidates) * second[below] + candidates * second[below + 1]
        at = self.level_value(below + candidates)
        return float(np.max(mixed - at * at))

    def mean_variance(self, n: int, values: ArrayLike | None = None) -> float:
        """Exact Var(mean) for n reports: of the given n true values, or the worst case."""
        n = check_int(n, "n", 1)
        if values is None:
            return self.worst_report_variance() / n
        variances = self.report_variance(values)
        if variances.size != n:
            raise ParameterError("values", f"must hold n = {n} values, got {variances.size}")
        return float(variances.sum()) / n**2

    @functools.cached_property
    def _second_moments(self) -> NDArray[np.float64]:
        """E[y^2 | level s], computed once (a mechanism never changes after construction)."""
        x = self.levels
        moments: NDArray[np.float64] = self.level_variance() + x * x
        return moments

    # -- privacy audit (ldptel.analysis.numeric) --------------------------------------------
    # As FrequencyOracle's: events of the unordered pair of levels {level, other}, the same
    # events in the same order for both orders of the pair.
    audit_event_count: int

    @abstractmethod
    def audit_events(self, batch: ReportBatch, level: int, other: int) -> NDArray[np.int64]:
        """Map each report to one of `audit_event_count` events (sampled audit)."""

    @abstractmethod
    def audit_probabilities(self, level: int, other: int) -> NDArray[np.float64]:
        """Exact probability of each audit event when the level is `level` (exact audit)."""
