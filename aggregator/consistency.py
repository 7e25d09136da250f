"""Post-processing of unbiased estimates into consistent ones (Wang, Lopuhaä-Zwakenberg, Li,
Skoric, Li, "Locally Differentially Private Frequency Estimation with Consistency", NDSS 2020).

Post-processing never costs privacy. The unbiased estimates stay in the report beside these.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ldptel.client.simplex import norm_sub

Vector = NDArray[np.float64]

__all__ = ["ALIASES", "METHODS", "base_cut", "clip", "consistent", "norm_mul", "norm_sub"]


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
