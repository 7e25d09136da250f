"""Longitudinal simulation: n installs report once per window for T windows, each mode at the
largest per-report epsilon its guarantee allows under one lifetime budget L
(`ldptel simulate --windows T --changes C --lifetime-epsilon L --memoization MODE`):

- "none" (fresh draws): T reports charged epsilon each, so epsilon = L / T;
- "exact_discloses_changes": one draw per (install, value), resent; at most C + 1 distinct
  values, so epsilon = L / (C + 1) (its promise holds only between histories with the same
  change pattern);
- "tree" (ldptel.client.tree): one horizon of T windows costs epsilon, so epsilon = L, with
  max_changes K = C + 1 (the first value counts as a change) unless given.

Values: an install's first value from the campaign's law, then C changes at distinct uniform
windows, each to a new value drawn afresh among the others. Every mode draws through the real
code's laws: the oracle's perturb_batch, support and estimate (fresh and exact), the tree's
exact samplers and estimator (`TreeShape.perturb_batch`, `carry`, `estimate`, `variance`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.client.campaign import CampaignConfig
from ldptel.client.memoization import MEMO_EXACT, MEMO_NONE, MEMO_TREE
from ldptel.client.oracles import FrequencyOracle
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below
from ldptel.client.tree import TreeShape
from ldptel.client.tree_wire import NO_BIT

LONGITUDINAL_MODES = (MEMO_NONE, MEMO_EXACT, MEMO_TREE)


def histories(
    law: NDArray[np.float64], installs: int, windows: int, changes: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """(installs, windows) values: a first value from `law`, then `changes` changes at
    distinct uniform windows (after the first), each to another value from `law`."""
    d = law.size
    values = np.empty((installs, windows), dtype=np.int64)
    current = rng.choice(d, size=installs, p=law)
    at = np.zeros((installs, windows), dtype=bool)
    if changes:
        picks = np.argsort(rng.random((installs, windows - 1)), axis=1)[:, :changes] + 1
        np.put_along_axis(at, picks, True, axis=1)
    for t in range(windows):
        moving = np.flatnonzero(at[:, t])
        if moving.size:
            fresh = rng.choice(d - 1, size=moving.size, p=None)  # uniform over the others
            current[moving] = fresh + (fresh >= current[moving])
        values[:, t] = current
    return values


@dataclass(frozen=True)
class WindowEstimates:
    """(windows, d) frequency estimates, their stated variances (NaN where none is stated),
    and the per-report epsilon the mode ran at."""

    estimates: NDArray[np.float64]
    variances: NDArray[np.float64]
    epsilon: float


def _oracle(d: int, epsilon: float) -> FrequencyOracle:
    domain = [f"v{i}" for i in range(d)]
    config = {"name": "s", "oracle": "de", "epsilon": epsilon, "domain": domain}
    return CampaignConfig.from_dict(config).build_oracle()


def oracle_windows(
    values: NDArray[np.int64], d: int, epsilon: float, exact: bool, rng: Rng
) -> WindowEstimates:
    """DE (the binary and small-domain oracle) per window: fresh draws, or one memo per
    (install, value) resent in every window of that value."""
    installs, windows = values.shape
    oracle = _oracle(d, epsilon)
    if exact:
        batch = oracle.perturb_batch(np.tile(np.arange(d), installs), rng)
        rows = np.arange(installs)[:, None] * d + values
    else:
        batch = oracle.perturb_batch(values.reshape(-1), rng)
        rows = np.arange(installs * windows).reshape(installs, windows)
    found, stated = [], []
    for t in range(windows):
        chosen = {name: column[rows[:, t]] for name, column in batch.items()}
        counts = oracle.estimate(oracle.support(chosen), installs)
        found.append(counts / installs)
        stated.append(oracle.variance(installs, counts) / installs**2)
    return WindowEstimates(np.stack(found), np.stack(stated), epsilon)


def tree_batches(
    values: NDArray[np.int64], shape: TreeShape, rng: Rng
) -> Iterator[dict[str, NDArray[np.int64]]]:
    """Every install's report in each window of one horizon, as a batch of the storage
    columns (client/tree_wire.py: item, level, bit; NO_BIT where no node is read)."""
    installs, windows = values.shape
    item, level, change = (
        sample_uniform_below(rng, bound, installs)
        for bound in (shape.items, shape.levels, shape.max_changes)
    )
    change = change + 1
    target = np.ones(installs, dtype=np.int64) if shape.items == 1 else item
    indicator = (values == target[:, None]).astype(np.int64)
    flips = np.diff(indicator, axis=1, prepend=0)  # +1, -1 at a change, 0 elsewhere
    seen = np.cumsum(flips != 0, axis=1)
    # The window of each install's j-th change (TreeShape.observe), or -1 if it never comes.
    hit = (seen == change[:, None]) & (flips != 0)
    sampled = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    sign = flips[np.arange(installs), np.maximum(sampled, 0)]
    for t in range(windows):
        h = shape.read_level(t)
        reading = np.flatnonzero(level == h)
        start = t + 1 - (1 << h)
        inside = (sampled[reading] >= start) & (sampled[reading] <= t)
        bits = np.full(installs, NO_BIT, dtype=np.int64)
        bits[reading] = shape.perturb_batch(np.where(inside, sign[reading], 0), rng)
        yield {"item": item, "level": level, "bit": bits}


def tree_windows(values: NDArray[np.int64], d: int, shape: TreeShape, rng: Rng) -> WindowEstimates:
    """The tree's estimates of every label's frequency in every window of one horizon (d = 2:
    label 1 tracked, label 0 its complement; else one sampled label per install)."""
    installs, windows = values.shape
    items = 1 if shape.items == 1 else d
    sums: list[dict[int, int]] = [{} for _ in range(items)]
    found = np.empty((windows, d))
    stated = np.empty((windows, d))
    for t, batch in enumerate(tree_batches(values, shape, rng)):
        read = batch["bit"] != NO_BIT
        plus_minus = 2 * batch["bit"][read] - 1
        for i in range(items):
            window_sum = int(plus_minus[batch["item"][read] == i].sum())
            sums[i] = shape.carry(t, sums[i], window_sum)
        estimate = np.array([shape.estimate(s, installs) for s in sums])
        if items == 1:
            estimate = np.array([1.0 - estimate[0], estimate[0]])
        found[t] = estimate
        # Each label's variance has its tracked indicator's frequency: label 1's for both
        # labels of a binary campaign (label 0's count is n minus it).
        indicators = np.full(d, estimate[1]) if items == 1 else estimate
        stated[t] = [shape.variance(t, installs, min(max(f, 0.0), 1.0)) for f in indicators]
    return WindowEstimates(found, stated, shape.epsilon)


def tracked_frequencies(values: NDArray[np.int64], d: int, max_changes: int) -> NDArray[np.float64]:
    """(windows, d) what the tree estimates: per label, the mean of each install's indicator
    after at most K changes (an install past K changes keeps the value of its K-th)."""
    out = []
    for label in range(d):
        indicator = (values == label).astype(np.int64)
        seen = np.cumsum(np.diff(indicator, axis=1, prepend=0) != 0, axis=1)
        tracked = np.where(seen <= max_changes, indicator, max_changes % 2)
        out.append(tracked.mean(axis=0))
    return np.stack(out, axis=1)


def run_mode(
    mode: str,
    values: NDArray[np.int64],
    d: int,
    lifetime: float,
    changes: int,
    rng: Rng,
    max_changes: int | None = None,
) -> WindowEstimates:
    """One mode's estimates at the largest per-report epsilon its guarantee allows."""
    windows = values.shape[1]
    if mode == MEMO_NONE:
        return oracle_windows(values, d, lifetime / windows, False, rng)
    if mode == MEMO_EXACT:
        return oracle_windows(values, d, lifetime / (changes + 1), True, rng)
    k = changes + 1 if max_changes is None else max_changes
    shape = TreeShape(windows, min(k, windows), lifetime, items=1 if d == 2 else d)
    return tree_windows(values, d, shape, rng)


def window_rmse(found: NDArray[np.float64], truth: NDArray[np.float64]) -> float:
    """The RMSE of one window's frequency estimates, over labels and windows."""
    return float(np.sqrt(np.mean((found - truth) ** 2)))
