"""Post-processing of unbiased estimates into consistent ones (Wang, Lopuhaä-Zwakenberg, Li,
Skoric, Li, "Locally Differentially Private Frequency Estimation with Consistency", NDSS 2020).

Post-processing never costs privacy. The unbiased estimates stay in the report beside these.
"""

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


def norm_mul(estimate: Vector, n: float) -> Vector:
    """Norm-Mul: clip at 0, then scale so the result sums to n (all zero if nothing is > 0)."""
    clipped = np.maximum(estimate, 0.0)
    total = clipped.sum()
    return clipped * (n / total) if total > 0 else clipped


def base_cut(estimate: Vector, threshold: Vector) -> Vector:
    """Base-Cut: keep the estimates above their significance threshold, set the rest to 0."""
    return np.where(estimate > threshold, estimate, 0.0)


def clip(estimate: Vector) -> Vector:
    """Base-Pos: clip negative estimates to 0 (non-negative, but no longer summing to n)."""
    return np.maximum(estimate, 0.0)


#: Selectable methods; "projection" is Norm-Sub under its geometric name.
METHODS = ("norm-sub", "norm-mul", "base-cut", "clip", "none")
ALIASES = {"projection": "norm-sub"}


def consistent(method: str, estimate: Vector, n: float, threshold: Vector) -> Vector:
    """Apply the named method; `threshold` is the per-item significance threshold (Base-Cut)."""
    method = ALIASES.get(method, method)
    if method == "norm-sub":
        return norm_sub(estimate, n)
    if method == "norm-mul":
        return norm_mul(estimate, n)
    if method == "base-cut":
        return base_cut(estimate, threshold)
    if method == "clip":
        return clip(estimate)
    if method == "none":
        return estimate.copy()
    raise ValueError(f"unknown consistency method {method!r}; known: {', '.join(METHODS)}")
