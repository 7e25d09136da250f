"""Consistent marginals by post-processing: non-negative, summing to n, and agreeing on shared
attributes. BIASED (like Norm-Sub): a clipped cell is no longer unbiased and its variance is
not the stated one; the unbiased estimates stay the report's numbers of record.

Each round (PriView's consistency step, Qardaji et al., SIGMOD 2014, Sec. 4.3): for every
attribute, the mean of its one-way projections over the marginals holding it becomes the
target, and each marginal's cells move by (target - projection) / (cells per target value);
then Norm-Sub (Wang et al., NDSS 2020, Sec. 4: add one delta to every cell, clip at 0, so the
positive cells sum to n) on every marginal. Rounds stop when the projections agree to
`tolerance` (a fraction of n) or after `max_rounds`; `disagreement` says how far they got."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.client.multi.mechanisms import Marginal


@dataclass(frozen=True)
class ConsistentMarginals:
    """Post-processed counts per marginal (same order and cell order as the input)."""

    counts: list[NDArray[np.float64]]
    rounds: int
    #: Largest difference between two projections of one attribute value, in users.
    disagreement: float
    biased: bool = True


def norm_sub(estimate: NDArray[np.float64], total: float) -> NDArray[np.float64]:
    """Cells max(x + delta, 0) summing to `total` (delta found exactly on the sorted cells)."""
    values = np.sort(estimate)[::-1]
    sums = np.cumsum(values)
    for k in range(values.size, 0, -1):
        delta = (total - sums[k - 1]) / k
        if values[k - 1] + delta >= 0:
            return np.asarray(np.maximum(estimate + delta, 0.0), dtype=np.float64)
    return np.full(estimate.size, total / estimate.size)


def _projection(marginal: Marginal, counts: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    axis = marginal.attributes.index(name)
    other = tuple(i for i in range(len(marginal.shape)) if i != axis)
    return np.asarray(counts.reshape(marginal.shape).sum(axis=other), dtype=np.float64)


def _spread(marginal: Marginal, delta: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """`delta` per value of `name`, spread evenly over the marginal's cells of that value."""
    axis = marginal.attributes.index(name)
    shape = [1] * len(marginal.shape)
    shape[axis] = marginal.shape[axis]
    per_cell = delta.reshape(shape) * marginal.shape[axis] / int(np.prod(marginal.shape))
    return np.asarray(np.broadcast_to(per_cell, marginal.shape).reshape(-1), dtype=np.float64)


def make_consistent(
    marginals: list[Marginal], tolerance: float = 1e-6, max_rounds: int = 200
) -> ConsistentMarginals:
    n = float(marginals[0].n)
    counts = [norm_sub(m.estimate, n) for m in marginals]
    names = sorted({name for m in marginals for name in m.attributes})
    rounds = 0
    while rounds < max_rounds and _disagreement(marginals, counts, names) > tolerance * n:
        for name in names:
            holding = [i for i, m in enumerate(marginals) if name in m.attributes]
            projections = [_projection(marginals[i], counts[i], name) for i in holding]
            target = np.mean(projections, axis=0)
            for i, projection in zip(holding, projections, strict=True):
                counts[i] = counts[i] + _spread(marginals[i], target - projection, name)
        counts = [norm_sub(c, n) for c in counts]
        rounds += 1
    return ConsistentMarginals(counts, rounds, _disagreement(marginals, counts, names))


def _disagreement(
    marginals: list[Marginal], counts: list[NDArray[np.float64]], names: list[str]
) -> float:
    worst = 0.0
    for name in names:
        projections = [
            _projection(m, c, name)
            for m, c in zip(marginals, counts, strict=True)
            if name in m.attributes
        ]
        worst = max(worst, float(np.ptp(projections, axis=0).max()))
    return worst
