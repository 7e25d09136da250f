"""Numeric mechanisms in simulation and audit: synthetic values of real shapes, n simulated
clients through a mechanism's own code, and its privacy audit on its levels.

The audits (analysis/audit.py) range over a law's inputs; for a numeric mechanism those are
its K + 1 levels (client/numeric/base.py: the loss over any two values is at most the loss
over two levels, since each value's law is a mixture of level laws). `LevelLaw` presents the
mechanism's private law (`perturb_levels`, and its exact event probabilities) to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ldptel.analysis.audit import (
    DEFAULT_SAMPLED_PAIRS,
    DEFAULT_SAMPLES,
    EXACT_PAIRS,
    AuditResult,
    audit,
)
from ldptel.analysis.simulation import Progress, chunk_rows
from ldptel.client.errors import ParameterError
from ldptel.client.numeric import Distribution, NumericMechanism
from ldptel.client.oracles.base import Field, ReportBatch, check_int
from ldptel.client.randomness import Rng

#: Synthetic value shapes over a range [lo, hi] (`synthetic_values`).
NUMERIC_DISTRIBUTIONS = ("lognormal", "bimodal", "uniform")
#: The log-normal latency: median at a tenth of the range, sigma 0.8 (about 0.3% of the
#: values lie above the range and clip to hi).
LOGNORMAL_MEDIAN, LOGNORMAL_SIGMA = 0.1, 0.8
#: The bimodal shape: (weight, centre, sd) of two normals, as fractions of the range.
BIMODAL = ((0.6, 0.25, 0.06), (0.4, 0.75, 0.08))


def synthetic_values(
    distribution: str, n: int, low: float, high: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """n values of the named shape over [low, high] (some may fall outside: clients clip)."""
    n = check_int(n, "n", 1)
    width = high - low
    if distribution == "lognormal":
        scaled = LOGNORMAL_MEDIAN * np.exp(rng.normal(0.0, LOGNORMAL_SIGMA, n))
    elif distribution == "bimodal":
        weights = [w for w, _, _ in BIMODAL]
        mode = rng.choice(len(BIMODAL), size=n, p=weights)
        centres = np.array([c for _, c, _ in BIMODAL])[mode]
        spreads = np.array([s for _, _, s in BIMODAL])[mode]
        scaled = rng.normal(centres, spreads)
    elif distribution == "uniform":
        scaled = rng.random(n)
    else:
        known = ", ".join(NUMERIC_DISTRIBUTIONS)
        raise ParameterError("distribution", f"must be one of {known}, got {distribution!r}")
    values: NDArray[np.float64] = low + width * scaled
    return values


def read_values(lines: list[str]) -> NDArray[np.float64]:
    """One number per line (blank lines skipped); ParameterError names the bad line."""
    values = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            raise ParameterError("values_file", f"line {number}: not a number: {text!r}") from None
        if math.isnan(value):
            raise ParameterError("values_file", f"line {number}: NaN is not a value")
        values.append(value)
    if not values:
        raise ParameterError("values_file", "holds no numbers")
    return np.array(values, dtype=np.float64)


@dataclass(frozen=True)
class NumericSimulation:
    """The mean's truth, estimate and standard errors, and for distribution mechanisms the
    estimated and true distributions over the mechanism's buckets."""

    n: int
    true_mean: float  # of the clipped values
    estimate: float
    stderr: float  # exact, from the true values (`mean_variance(n, values)`)
    estimated_stderr: float  # from the reports alone (`mean_variance_estimate`)
    worst_stderr: float  # exact, worst case over values
    support: NDArray[np.int64]
    distribution: Distribution | None
    true_probabilities: NDArray[np.float64] | None  # the clipped values' bucket fractions

    @property
    def wasserstein(self) -> float | None:
        """W1 distance between the estimated and the true bucket distributions (range's
        units): the integral of |CDF difference| over the levels' spacing."""
        if self.distribution is None or self.true_probabilities is None:
            return None
        return wasserstein(self.distribution, self.true_probabilities)


def wasserstein(estimate: Distribution, truth: NDArray[np.float64]) -> float:
    """W1 between two distributions on the same levels: sum |F - G| times the level spacing."""
    gaps = np.diff(estimate.points)
    difference = np.abs(np.cumsum(estimate.probabilities) - np.cumsum(truth))[:-1]
    return float(np.dot(difference, gaps))


def simulate_numeric(
    mechanism: NumericMechanism,
    values: ArrayLike,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> NumericSimulation:
    """Perturb, count and estimate the given values through the mechanism's own code."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    n = array.size
    rows = chunk_rows(mechanism)
    support = np.zeros(mechanism.support_size, dtype=np.int64)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        support += mechanism.support(mechanism.perturb_batch(array[start:stop], rng))
        if progress is not None:
            progress(stop, n)
    distribution = truth = None
    if mechanism.estimates_distribution:
        distribution = mechanism.distribution(support, n)
        truth = level_fractions(mechanism, array)
    return NumericSimulation(
        n=n,
        true_mean=float(mechanism.clip(array).mean()),
        estimate=mechanism.mean(support, n),
        stderr=math.sqrt(mechanism.mean_variance(n, array)),
        estimated_stderr=math.sqrt(max(mechanism.mean_variance_estimate(support, n), 0.0)),
        worst_stderr=math.sqrt(mechanism.mean_variance(n)),
        support=support,
        distribution=distribution,
        true_probabilities=truth,
    )


def level_fractions(mechanism: NumericMechanism, values: ArrayLike) -> NDArray[np.float64]:
    """The expected fraction of the values at each level after the unbiased rounding (what
    the distribution mechanisms estimate): each value splits (1 - f, f) between its two."""
    below, fraction = mechanism.positions(values)
    levels = mechanism.resolution + 1
    mass = np.bincount(below, weights=1 - fraction, minlength=levels)
    mass += np.bincount(below + 1, weights=fraction, minlength=levels)
    result: NDArray[np.float64] = mass / mass.sum()
    return result


class LevelLaw:
    """A numeric mechanism's private law with its levels as the inputs, as the audits take it."""

    def __init__(self, mechanism: NumericMechanism) -> None:
        self.mechanism = mechanism

    @property
    def name(self) -> str:
        return self.mechanism.name

    @property
    def epsilon(self) -> float:
        return self.mechanism.epsilon

    @property
    def domain_size(self) -> int:
        return self.mechanism.domain_size

    @property
    def audit_event_count(self) -> int:
        return self.mechanism.audit_event_count

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.mechanism.fields

    def perturb_batch(self, values: NDArray[np.int64], rng: Rng) -> ReportBatch:
        return self.mechanism.perturb_levels(np.asarray(values, dtype=np.int64), rng)

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        return self.mechanism.audit_events(batch, value, other)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        return self.mechanism.audit_probabilities(value, other)


def audit_numeric(
    mechanism: NumericMechanism,
    rng: np.random.Generator,
    samples: int = DEFAULT_SAMPLES,
    sampled_pairs: int = DEFAULT_SAMPLED_PAIRS,
    exact_pairs: int = EXACT_PAIRS,
    progress: Progress | None = None,
) -> AuditResult:
    """Both audits (analysis.audit.audit) of the mechanism's law over its levels."""
    return audit(
        LevelLaw(mechanism),
        rng,
        samples=samples,
        sampled_pairs=sampled_pairs,
        exact_pairs=exact_pairs,
        progress=progress,
    )
