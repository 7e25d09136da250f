"""Optimal composition: what k reports of pure-epsilon mechanisms amount to as (epsilon, delta).

Any eps-DP mechanism is a post-processing of randomized response at eps on two inputs
(Kairouz, Oh, Viswanath, ICML 2015, Thm. 2.2), so k reports on fresh randomness are at most
as revealing as k independent randomized responses, and that composition is exactly computable:
its privacy loss is a sum of +-eps_i, +eps_i with probability e^eps_i / (1 + e^eps_i), and
delta(eps) = E[(1 - e^(eps - L))_+] (the hockey-stick divergence; for one eps this is KOV
2015's optimal composition, Thm. 3.3, in closed form). An (eps_i, delta_i) mechanism is
likewise one that fails with probability delta_i and is randomized response otherwise (KOV
2015), so delta(eps) = 1 - prod(1 - delta_i) (1 - delta_RR(eps)).

Computed in plain numpy because the SDK's base install is numpy, xxhash, requests and
platformdirs only; tests check it against exact sums, against Google's dp-accounting PLD
accountant and against the basic composition it replaces (docs/client.md, "The privacy ledger").
Every figure is an upper bound: binomial tails beyond 12 standard deviations are charged as a
failure (their Chernoff bound), and several epsilons are composed on a grid whose losses are
rounded up.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

#: Standard deviations of each binomial kept on either side; the rest is charged to delta.
_SDS = 12.0
#: Grid cells of a composition of several epsilons (the rounding costs <= its step per epsilon).
_GRID = 1 << 17
#: Above this the exponentials overflow: such losses are stated by basic composition instead.
_LARGEST = 700.0

#: (epsilon, how many reports at it)
Charges = Iterable[tuple[float, int]]


def composed_epsilon(charges: Charges, delta: float, each_delta: float = 0.0) -> float:
    """The smallest eps with the composition of the charges (`count` mechanisms at (epsilon,
    each_delta) per pair) (eps, delta)-DP, rounded up; math.inf if delta cannot be met."""
    kept = [(float(e), int(k)) for e, k in charges if k > 0 and e > 0.0]
    basic = math.fsum(e * k for e, k in kept)
    reports = sum(k for _, k in kept)
    survive = (1.0 - each_delta) ** reports
    if survive <= 1.0 - delta:
        return math.inf
    if not kept:
        return 0.0
    loss, mass, failed = _privacy_loss(kept)
    # delta_total = 1 - survive (1 - failed - delta_RR) <= delta  <=>  delta_RR <= target
    target = 1.0 - (1.0 - delta) / survive - failed
    if target <= 0.0:  # basic composition: (sum of epsilons, 1 - survive), within delta
        return basic
    return min(basic, _epsilon_for(loss, mass, target))


def composed_delta(charges: Charges, epsilon: float, each_delta: float = 0.0) -> float:
    """The delta of the composition of the charges at `epsilon` (an upper bound)."""
    kept = [(float(e), int(k)) for e, k in charges if k > 0 and e > 0.0]
    survive = (1.0 - each_delta) ** sum(k for _, k in kept)
    if not kept:
        return 1.0 - survive
    loss, mass, failed = _privacy_loss(kept)
    above = loss > epsilon
    pure = failed + float(np.dot(mass[above], -np.expm1(epsilon - loss[above])))
    return min(1.0, 1.0 - survive * (1.0 - pure))


@functools.lru_cache(maxsize=256)
def max_reports(epsilon: float, lifetime_epsilon: float, delta: float) -> int:
    """The most reports at `epsilon` whose composition is (lifetime_epsilon, delta)-DP: at
    least lifetime_epsilon / epsilon (basic composition), usually many more."""

    def fits(k: int) -> bool:
        return composed_epsilon([(epsilon, k)], delta) <= lifetime_epsilon * (1 + 1e-9)

    low = max(0, math.floor(lifetime_epsilon / epsilon * (1 + 1e-9)))
    high = max(1, 2 * low)
    while fits(high):
        low, high = high, 2 * high
    while high - low > 1:  # fits(low), not fits(high)
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def binomial_log_pmf(trials: int, p: float, k: NDArray[np.int64]) -> NDArray[np.float64]:
    """log Pr[Bin(trials, p) = k] for consecutive k: lgamma at the first, then the ratio
    Pr[k + 1] / Pr[k] = (trials - k) p / ((k + 1)(1 - p)) accumulated."""
    first = int(k[0])
    anchor = (
        math.lgamma(trials + 1)
        - math.lgamma(first + 1)
        - math.lgamma(trials - first + 1)
        + first * math.log(p)
        + (trials - first) * math.log1p(-p)
    )
    steps = np.log((trials - k[:-1]) / (k[:-1] + 1.0)) + math.log(p) - math.log1p(-p)
    return anchor + np.concatenate(([0.0], np.cumsum(steps)))


def binomial_window(trials: int, p: float) -> tuple[int, int, float]:
    """The k kept of Bin(trials, p), mean +- 12 sd, and a bound on the mass outside them."""
    spread = _SDS * math.sqrt(trials * p * (1 - p)) + 2
    low = max(0, math.floor(trials * p - spread))
    high = min(trials, math.ceil(trials * p + spread))
    return low, high, chernoff(trials, p, low - 1) + chernoff(trials, p, high + 1)


def chernoff(trials: int, p: float, k: int) -> float:
    """A bound on Pr[Bin(trials, p) <= k] (k below the mean) or Pr[>= k] (above it):
    exp(-trials KL(k / trials || p)) (Chernoff-Hoeffding); 0 for k out of [0, trials]."""
    if k < 0 or k > trials:
        return 0.0
    a = k / trials
    kl = (a * math.log(a / p) if a > 0 else 0.0) + (
        (1 - a) * math.log((1 - a) / (1 - p)) if a < 1 else 0.0
    )
    return math.exp(-trials * kl)


def _randomized_response(
    epsilon: float, count: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """The privacy loss of `count` randomized responses at epsilon: losses (count - 2 l) eps,
    l ~ Bin(count, 1 / (1 + e^eps)) flipped answers, with the mass of the l not kept."""
    # 1 / (1 + e^eps) without overflow; past eps ~ 745 it is 0: no answer is ever flipped.
    flip = math.exp(-epsilon) / (1.0 + math.exp(-epsilon))
    if flip == 0.0:
        return np.array([count * epsilon]), np.array([1.0]), 0.0
    low, high, outside = binomial_window(count, flip)
    flips = np.arange(low, high + 1)
    mass = np.exp(binomial_log_pmf(count, flip, flips))
    loss = (count - 2 * flips).astype(np.float64) * epsilon
    return loss, mass / mass.sum(), outside


def _privacy_loss(
    charges: list[tuple[float, int]],
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Loss values, their probabilities and the probability charged as failure, for the
    composition of every charge's randomized responses: exact for one epsilon; for several, on
    a grid with each loss rounded up (delta only grows with the loss, so this bounds it)."""
    merged: dict[float, int] = {}
    for epsilon, count in charges:
        merged[epsilon] = merged.get(epsilon, 0) + count
    parts = [_randomized_response(e, k) for e, k in sorted(merged.items())]
    failed = 1.0 - math.prod(1.0 - outside for _, _, outside in parts)
    if len(parts) == 1:
        return parts[0][0], parts[0][1], failed
    step = sum(float(np.ptp(loss)) for loss, _, _ in parts) / _GRID or 1.0
    total = np.ones(1)
    offset = 0
    for loss, mass, _ in parts:
        cells = np.ceil(loss / step).astype(np.int64)
        dense = np.bincount(cells - cells.min(), weights=mass).astype(np.float64)
        total = _convolve(total, dense)
        offset += int(cells.min())
    total = np.maximum(total, 0.0)  # the FFT's rounding, ~1e-17
    keep = total > 0.0
    grid = (np.arange(total.size)[keep] + offset).astype(np.float64)
    return grid * step, total[keep], failed


def _convolve(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    size = a.size + b.size - 1
    if min(a.size, b.size) < 64:
        return np.convolve(a, b)
    fft = 1 << (size - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a, fft) * np.fft.rfft(b, fft), fft)[:size]


def _epsilon_for(loss: NDArray[np.float64], mass: NDArray[np.float64], target: float) -> float:
    """The smallest eps >= 0 with E[(1 - e^(eps - L))_+] <= target, for L taking `loss` with
    probabilities `mass`. Between consecutive losses l_(i+1) <= eps < l_i (descending) it is
    A_i - e^eps B_i, A_i and B_i the sums of mass and mass e^-l over the i largest losses."""
    order = np.argsort(-loss)
    loss, mass = loss[order], mass[order]
    positive = loss > 0.0
    loss, mass = loss[positive], mass[positive]
    if loss.size == 0:
        return 0.0
    if loss[0] > _LARGEST:
        return math.inf
    a = np.cumsum(mass)
    b = np.cumsum(mass * np.exp(-loss))
    below = np.append(loss[1:], 0.0)  # each segment's lower end
    at_below = a - np.exp(below) * b  # delta at the segment's lower end
    over = np.flatnonzero(at_below > target)
    if over.size == 0:
        return 0.0
    i = int(over[0])
    epsilon = math.log((float(a[i]) - target) / float(b[i]))
    return min(max(epsilon, float(below[i])), float(loss[i])) * (1 + 1e-12)
