"""Projection of estimates onto the simplex, shared by the aggregator's consistency step
(aggregator/consistency.py) and the numeric mechanisms' distributions (client/numeric)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Vector = NDArray[np.float64]


def norm_sub(estimate: Vector, n: float) -> Vector:
    """Norm-Sub: add one constant delta to every estimate and clip at 0, with delta chosen so
    the result sums to n. This is the Euclidean projection onto {x >= 0, sum x = n}, i.e. the
    constrained least squares solution (Wang et al. 2020, Sec. 4); their recommended default."""
    if n <= 0 or estimate.size == 0:
        return np.zeros_like(estimate)
    # Projection onto the scaled simplex (Duchi et al. 2008): the largest rho with
    # u_rho - (sum_{i<=rho} u_i - n) / rho > 0 over the estimates sorted in decreasing order.
    ordered = np.sort(estimate)[::-1]
    excess = np.cumsum(ordered) - n
    ranks = np.arange(1, estimate.size + 1)
    rho = int(np.flatnonzero(ordered - excess / ranks > 0)[-1])
    shift = float(excess[rho]) / (rho + 1)
    projected: Vector = np.maximum(estimate - shift, 0.0)
    return projected
