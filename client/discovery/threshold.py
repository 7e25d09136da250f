"""The release threshold of a sketch's candidates: the estimate a candidate nobody holds
exceeds with probability at most `tail`, over the reports' randomness AND the hash family.

Why not z * stderr: a sketch's public hash family is fixed, so a candidate v nobody holds is
offset by its collisions with the strings held (client/oracles/sketch.py, "Fixed family"):
    F = (m/(m-1)) sum_w n_w (rho(v, w) - 1/m),  k rho(v, w) ~ Binomial(k, 1/m)
for a random family (hashes as random functions, independent across strings). F is a sum of a
few scaled binomials dominated by the heaviest strings, far from normal when k/m is small: at
k = m = 64 a candidate sharing 6 of 64 rows with a string held by 2/3 of the users sits at 5
family stderrs (P ~ 5e-4, not 3e-7), and a normal threshold listed 0.27 unheld candidates a
report (55 in 200) where it stated 0.05; this one none in 200.

The threshold here (null X = N + F; N ~ Normal(0, the variance at f = 0), the reports' noise
under the normal approximation every threshold here uses):
1. Worst case of F given c >= the largest count: the n users in floor(n / c) strings of c and
   one of the remainder. That count vector majorizes every other with entries <= c, and a
   weighted sum of i.i.d. variables grows in the convex order with its weights' majorization
   (Marshall, Olkin, Arnold, "Inequalities", 2nd ed. 2011, Ch. 11.B), so F_worst >=cx F:
   a_c (B_L - L k/m) + a_r (B_r - k/m), B_L ~ Binomial(L k, 1/m) exactly (sum of L binomials).
2. T = CVaR_tail(N + F_worst), the expected shortfall (Rockafellar & Uryasev 2000:
   CVaR_a(X) = min_s s + E[(X - s)+] / a). CVaR is monotone in the convex order and exceeds
   the tail quantile, so P(N + F > T) <= P(N + F > CVaR_tail(N + F)) <= tail for the real F.
   With F negligible T ~ (z + 1/z) sigma: about 0.25 sigma above the normal quantile, the price
   of holding whatever the other strings' counts are.
The distribution of F_worst is put on a grid rounded up (stochastically larger, so conservative).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from ldptel.client.oracles.sketch import KeySketch

#: Grid cells for the collision offset's distribution (its rounding adds < 2 cells to T).
_GRID = 4096
#: Standard deviations of N per grid cell at most (finer only costs time).
_PER_SIGMA = 64


def largest_count_bound(oracle: KeySketch, n: int, largest_estimate: float, z: float) -> float:
    """An upper bound on the count of the most-held string from the largest candidate estimate
    (assumed to be that string's): its noise at z standard deviations, plus n/(m - 1), the
    most its collisions can pull an estimate down (rho = 0 for every other string)."""
    f = min(1.0, max(0.0, largest_estimate / max(n, 1)))
    noise = float(oracle.key_variance(n, np.array([f]))[0])
    return min(float(n), largest_estimate + z * math.sqrt(noise) + n / (oracle.m - 1))


def candidates_threshold(
    oracle: KeySketch, n: int, estimate: NDArray[np.float64], tail: float
) -> float:
    """`release_threshold` at `tail` for candidates with these estimates, the largest taken
    as the most-held string's (`largest_count_bound` at the test's own z)."""
    z = NormalDist().inv_cdf(1.0 - tail)
    top = float(estimate.max()) if estimate.size else 0.0
    return release_threshold(oracle, n, largest_count_bound(oracle, n, top, z), tail)


def release_threshold(oracle: KeySketch, n: int, largest: float, tail: float) -> float:
    """T with P[estimate of a candidate nobody holds > T] <= tail when no string is held by
    more than `largest` of the n users (module doc)."""
    sigma = math.sqrt(float(oracle.key_variance(n, np.zeros(1))[0]))
    values, weights = _worst_offsets(oracle, n, largest, sigma)
    return _expected_shortfall(values, weights, sigma, tail)


def _worst_offsets(
    oracle: KeySketch, n: int, largest: float, sigma: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The distribution of F_worst on a grid (values rounded up, and their probabilities)."""
    k, m = oracle.k, oracle.m
    c = max(1, min(n, math.ceil(largest)))
    chunks, rest = divmod(n, c)
    scale = m / (m - 1) / k
    parts = []
    for trials, count in ((chunks * k, c), (k, rest)):
        b, p = _binomial(trials, 1 / m)
        parts.append((scale * count * (b - trials / m), p))
    span = sum(float(offset.max() - offset.min()) for offset, _ in parts)
    width = max(sigma / _PER_SIGMA, span / _GRID, 1e-12)
    grid: NDArray[np.float64] = np.ones(1)
    low = 0.0
    for offset, p in parts:
        cells = np.ceil((offset - offset.min()) / width).astype(np.int64)
        grid = np.convolve(grid, np.bincount(cells, weights=p))
        low += float(offset.min())
    values: NDArray[np.float64] = low + width * np.arange(grid.size, dtype=np.float64)
    return values, grid


def _binomial(trials: int, p: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Binomial(trials, p)'s support where its mass is not negligible (beyond mean + 40 sd +
    60 it is below 1e-150), and its probabilities (normalized)."""
    mean, sd = trials * p, math.sqrt(trials * p * (1 - p))
    lo = max(0, math.floor(mean - 40 * sd - 60))
    hi = min(trials, math.ceil(mean + 40 * sd + 60))
    b = np.arange(lo, hi + 1, dtype=np.float64)
    log_choose = np.array(
        [math.lgamma(trials + 1) - math.lgamma(x + 1) - math.lgamma(trials - x + 1) for x in b]
    )
    log_pmf = log_choose + b * math.log(p) + (trials - b) * math.log1p(-p)
    pmf = np.exp(log_pmf - log_pmf.max())
    return b, pmf / pmf.sum()


def _expected_shortfall(
    values: NDArray[np.float64], weights: NDArray[np.float64], sigma: float, tail: float
) -> float:
    """CVaR_tail of N(0, sigma^2) + F, F taking `values` with probabilities `weights`: s + E[(X -
    s)+] / tail at the s where P(X > s) = tail (the minimizer of Rockafellar-Uryasev's form)."""
    keep = weights > 1e-300
    values, weights = values[keep], weights[keep]

    def exceed(s: float) -> float:
        return float(np.dot(weights, _normal_sf((s - values) / sigma)))

    lo, hi = float(values.min()) - 40 * sigma, float(values.max()) + 40 * sigma
    for _ in range(200):  # bisection: P(X > s) decreases in s
        mid = (lo + hi) / 2
        if exceed(mid) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * max(1.0, abs(hi)):
            break
    s = hi
    u = (values - s) / sigma
    # E[(N + f - s)+] = sigma (phi(u) + u Phi(u)), u = (f - s) / sigma.
    phi = np.exp(-(u**2) / 2) / math.sqrt(2 * math.pi)
    cdf = _normal_sf(-u)
    shortfall = sigma * float(np.dot(weights, phi + u * cdf))
    return s + shortfall / tail


def _normal_sf(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(Z > x) for a standard normal Z, elementwise (erfc keeps the far tail's precision)."""
    return np.fromiter((0.5 * math.erfc(v / math.sqrt(2)) for v in x.tolist()), np.float64, x.size)
