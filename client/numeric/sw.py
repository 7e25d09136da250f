"""Square Wave with EMS reconstruction (Li, Wang, Lopuhaae-Zwakenberg, Li, Skoric, Li,
SIGMOD 2020, Sec. 4-5): for v in [0, 1] the output lies in [-b, 1 + b] with density p on
[v - b, v + b] and q elsewhere, p / q = e^eps, where

    b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))

maximizes the mutual information between input and output (their eq. 9). On the grid this
is the sliding band (band.py) with w / K = 2b.

The distribution: the codes' histogram c and the law M (K + 1 levels x N codes) feed
Expectation-Maximization with Smoothing: x <- x * (M c / (M^T x)) / n, then a binomial
[1, 2, 1] / 4 smoothing of x (their Alg. 1 and Sec. 5.2), until the log-likelihood gains
less than EMS_TOLERANCE. The mean is the sliding band's unbiased estimate (the EMS
distribution's own mean is smoothed, so not unbiased).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ldptel.client.numeric.band import SlidingBand
from ldptel.client.numeric.base import Distribution

#: EMS stops when an iteration gains less log-likelihood than this (nats, on all n reports;
#: Li et al. 2020, Sec. 5.2 use a threshold on the log-likelihood's change).
EMS_TOLERANCE = 1e-3
EMS_MAX_ITERATIONS = 10_000


def square_wave_b(epsilon: float) -> float:
    """Li et al.'s b for epsilon (eq. 9); its limit 1/2 as epsilon -> 0."""
    e = math.exp(epsilon)
    denominator = 2 * e * (math.expm1(epsilon) - epsilon)
    if denominator <= 0 or epsilon < 1e-4:
        return 0.5
    return (epsilon * e - e + 1) / denominator


def smooth(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Binomial smoothing [1, 2, 1] / 4, each end averaging only with its one neighbour."""
    padded = np.concatenate(([x[0]], x, [x[-1]]))
    result: NDArray[np.float64] = (padded[:-2] + 2 * padded[1:-1] + padded[2:]) / 4
    normalized: NDArray[np.float64] = result / result.sum()
    return normalized


def ems(
    law: NDArray[np.float64],
    counts: NDArray[np.float64],
    tolerance: float = EMS_TOLERANCE,
    max_iterations: int = EMS_MAX_ITERATIONS,
) -> NDArray[np.float64]:
    """EMS estimate of the input distribution over the law's rows (P(code | level))."""
    levels = law.shape[0]
    x = np.full(levels, 1.0 / levels)
    n = counts.sum()
    seen = counts > 0
    previous = -math.inf
    for _ in range(max_iterations):
        predicted = x @ law
        likelihood = float(np.dot(counts[seen], np.log(predicted[seen])))
        if likelihood - previous < tolerance:
            break
        previous = likelihood
        ratio = np.where(seen, counts / np.maximum(predicted, 1e-300), 0.0)
        x = smooth(x * (law @ ratio) / n)
    return x


class SquareWave(SlidingBand):
    """SW on the grid: the mean (unbiased) and the distribution (EMS)."""

    name = "sw"
    estimates_distribution = True

    @staticmethod
    def optimal_band_fraction(epsilon: float) -> float:
        return 2 * square_wave_b(epsilon)

    def distribution(self, support: NDArray[np.int64], n: int) -> Distribution:
        return Distribution.on_levels(
            self.levels, ems(self.law(), np.asarray(support, dtype=np.float64))
        )
