"""Change tracking over a horizon of windows: memoization mode "tree".

The longitudinal protocol of Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta,
"Amplification by Shuffling", SODA 2019 (Sec. 3, the local protocol for tracking changes):
a horizon is T consecutive windows (aligned on the campaign's window clock: horizon
window_index // T); over it, an install tracks one indicator (a binary campaign's label 1, or
a sampled label of a categorical one), whose changes are the windows where it flips (from 0
before the install's first report: a first value of 1 counts as a change). The install draws,
once per horizon and uniformly:

- `item`, the label whose indicator it tracks (0 when the campaign tracks one indicator),
- `level` h in 0..L-1 of the dyadic tree over the horizon (L = floor(log2 T) + 1 levels),
- `change` j in 1..K (K = max_changes), the change it will report.

Every window it sends one report (item, level); in the windows t where a left node of its
level ends (level == trailing zeros of t + 1: the nodes of the prefix decompositions, the only
ones an estimate reads) the report carries one bit: randomized response at epsilon of the sign
of its j-th change if that change lies in the node, else a fair coin.

Privacy (what `test_tree_privacy.py` computes exactly): between ANY two indicator histories
of one horizon, whatever T, at most epsilon. Given (item, level, j), two histories differ in
the bits of at most the two nodes holding their j-th changes; a fair coin against a bit kept
with probability p = e^eps / (1 + e^eps) has ratio at most 2p < e^eps, and the ratio of the
two nodes together is at most p / (1 - p) = e^eps; a mixture over j keeps the bound. The item
and level are public (sent); j is not. So a categorical history is protected as the history of
every one of its indicators, and an install past K changes stops reporting later ones: a bias
of its estimate, never a privacy loss.

Estimate (prefix sums over the tree): window t's count of installs whose tracked indicator is 1
is scale * sum over the nodes of [0, t]'s dyadic decomposition (one per set bit of t + 1) of
their sums of +-1 bits, scale = items * K * L / c with c = 2p - 1: unbiased, because an
install's j-th change lies in exactly one node of the decomposition, reported by the 1/L of
installs at its level, 1/K of them sampling it, 1/items of them tracking its label. Variance
per install: items * K^2 * L * |D_t| / c^2 - x_t^2 (x_t its tracked indicator); see
`TreeShape.variance`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import check_epsilon, check_int
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_bernoulli, sample_uniform_below

#: Horizons are at most this many windows (about 45 years of daily windows): 15 levels.
MAX_HORIZON_WINDOWS = 1 << 14
#: At most this many tracked changes per horizon (the variance grows as K^2).
MAX_CHANGES = 64


def trailing_zeros(number: int) -> int:
    """The exponent of the largest power of two dividing `number` (> 0)."""
    return (number & -number).bit_length() - 1


@dataclass(frozen=True)
class TreeState:
    """One install's draws for one horizon, and what it has seen of its indicator.

    `last` is the tracked indicator's value in the last window observed (0 before the first),
    `changes` how many changes it has seen (capped at K + 1), `sampled` the window of its
    j-th change (-1 until it happens) and `sign` that change's sign (+1: 0 -> 1)."""

    item: int
    level: int
    change: int
    last: int = 0
    changes: int = 0
    sampled: int = -1
    sign: int = 0


@dataclass(frozen=True)
class TreeReport:
    """What one install sends in one window: its item and level, and a bit (0 or 1) in the
    windows where a node of its level is read (None otherwise)."""

    item: int
    level: int
    bit: int | None


@dataclass(frozen=True)
class TreeShape:
    """The public parameters of a horizon: T windows, K tracked changes, epsilon, and the
    number of indicators tracked (1: a binary campaign's label 1; d: one of d labels)."""

    horizon_windows: int
    max_changes: int
    epsilon: float
    items: int = 1

    def __post_init__(self) -> None:
        check_int(self.horizon_windows, "horizon_windows", 1, MAX_HORIZON_WINDOWS)
        check_int(self.max_changes, "max_changes", 1, MAX_CHANGES)
        check_epsilon(self.epsilon)
        check_int(self.items, "items", 1)

    @property
    def levels(self) -> int:
        """L = floor(log2 T) + 1: the levels whose nodes fit in the horizon."""
        return self.horizon_windows.bit_length()

    @property
    def keep(self) -> float:
        """P[the informative bit is the change's sign] = e^eps / (1 + e^eps) (randomized
        response at epsilon: the exact-loss tests find the loss exactly epsilon)."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    @property
    def contrast(self) -> float:
        """c = E[bit +-1 | sign +1] = 2p - 1 = (e^eps - 1) / (e^eps + 1)."""
        return 2.0 * self.keep - 1.0

    @property
    def scale(self) -> float:
        """What one +-1 bit of a read node counts for in a window's count estimate."""
        return self.items * self.max_changes * self.levels / self.contrast

    def read_level(self, t: int) -> int:
        """The level whose node ending at window t (0-based in the horizon) is read by the
        estimates: the trailing zeros of t + 1 (a left child, or the root)."""
        return trailing_zeros(t + 1)

    def decomposition(self, t: int) -> list[tuple[int, int]]:
        """The dyadic nodes (level, start window) partitioning windows [0, t]: one per set
        bit of t + 1, highest level first."""
        nodes, start = [], 0
        for level in range(self.levels - 1, -1, -1):
            if (t + 1) >> level & 1:
                nodes.append((level, start))
                start += 1 << level
        return nodes

    def initial_law(self) -> Iterator[tuple[Fraction, TreeState]]:
        """Every state a new horizon's draws can give, with its exact probability (the law
        `new_state` samples: item, level and change uniform and independent)."""
        weight = Fraction(1, self.items * self.levels * self.max_changes)
        for item in range(self.items):
            for level in range(self.levels):
                for change in range(1, self.max_changes + 1):
                    yield weight, TreeState(item, level, change)

    def new_state(self, rng: Rng) -> TreeState:
        """A new horizon's draws (exact uniform integers from `rng`)."""
        item, level, change = (
            int(sample_uniform_below(rng, bound, 1)[0])
            for bound in (self.items, self.levels, self.max_changes)
        )
        return TreeState(item=item, level=level, change=change + 1)

    def observe(self, state: TreeState, t: int, indicator: int) -> TreeState:
        """The state after seeing the tracked indicator (0 or 1) in window t."""
        if indicator == state.last:
            return state
        changes = min(state.changes + 1, self.max_changes + 1)
        seen = replace(state, last=indicator, changes=changes)
        if changes == state.change:  # the sampled change: remember where and which way
            return replace(seen, sampled=t, sign=1 if indicator else -1)
        return seen

    def node_sign(self, state: TreeState, t: int) -> int | None:
        """What the report of window t randomizes: None when no node of the state's level is
        read in t (the report carries no bit); else the sampled change's sign if it lies in
        the node ending at t, 0 if not."""
        if state.level != self.read_level(t):
            return None
        start = t + 1 - (1 << state.level)
        return state.sign if start <= state.sampled <= t else 0

    def indicator(self, state: TreeState, value: int) -> int:
        """The tracked indicator of a value (a label's index): label 1 of a binary campaign
        (items = 1; label 0's frequency is the complement), else the state's item."""
        return int(value == (1 if self.items == 1 else state.item))

    def bit_one_probability(self, sign: int) -> float:
        """P[bit = 1] for a node of `sign`: randomized response of the sign (1 means +1),
        a fair coin for 0."""
        return 0.5 if sign == 0 else (self.keep if sign > 0 else 1.0 - self.keep)

    def report(self, state: TreeState, t: int, rng: Rng) -> TreeReport:
        """The report of window t (exact draws: a fair bit, or a Bernoulli of keep's value)."""
        sign = node_sign(self, state, t)
        if sign is None:
            return TreeReport(state.item, state.level, None)
        if sign == 0:
            bit = int(sample_uniform_below(rng, 2, 1)[0])
        else:
            kept = bool(sample_bernoulli(rng, self.keep, 1)[0])
            bit = int(kept == (sign > 0))
        return TreeReport(state.item, state.level, bit)

    def perturb_batch(self, signs: NDArray[np.int64], rng: Rng) -> NDArray[np.int64]:
        """Bits (0/1) for many read nodes of signs -1, 0, +1 (simulation: the same law as
        `report`, drawn in one batch)."""
        coins = sample_uniform_below(rng, 2, signs.size).astype(bool)
        kept = sample_bernoulli(rng, self.keep, signs.size)
        bits = np.where(signs == 0, coins, kept == (signs > 0))
        return bits.astype(np.int64)

    def variance(self, t: int, n: int, tracked: float) -> float:
        """Exact variance of window t's frequency estimate from n installs whose tracked
        indicators have mean `tracked`: (items K^2 L |D_t| / c^2 - tracked) / n (one term of
        the estimate per install: E[X^2] = scale^2 P[its level and item are read])."""
        reads = len(self.decomposition(t))
        per_install = self.items * self.max_changes**2 * self.levels * reads
        return (per_install / self.contrast**2 - tracked) / n

    def estimate(self, sums: Mapping[int, int], n: int) -> float:
        """Window t's frequency estimate of one item from its decomposition's node sums
        (level -> sum of +-1 bits of its read node), over n installs."""
        return self.scale * sum(sums.values()) / n

    def carry(self, t: int, previous: Mapping[int, int], window_sum: int) -> dict[int, int]:
        """The node sums of window t's decomposition (level -> sum) from window t - 1's and
        the sum of the bits read in window t (at `read_level(t)`): the prefix's lower levels
        merge into the new node, so no earlier window is read again."""
        level = self.read_level(t)
        kept = {h: s for h, s in previous.items() if h > level}
        kept[level] = window_sum
        return kept


def node_sign(shape: TreeShape, state: TreeState, t: int) -> int | None:
    """`TreeShape.node_sign` (a module function, so a test can swap in a broken variant)."""
    return shape.node_sign(state, t)


def tracked_indicator(shape: TreeShape, history: list[int]) -> list[int]:
    """The indicator an estimate follows for one install: its value after min(changes, K)
    changes (an install past K changes keeps the value of its K-th)."""
    tracked, value, changes = [], 0, 0
    for indicator in history:
        if indicator != value and changes < shape.max_changes:
            value, changes = indicator, changes + 1
        tracked.append(value)
    return tracked


def check_tree(horizon_windows: object, max_changes: object) -> tuple[int, int]:
    """A config's horizon and change cap, validated (ParameterError names the field)."""
    horizon = check_int(horizon_windows, "horizon_windows", 1, MAX_HORIZON_WINDOWS)
    changes = check_int(max_changes, "max_changes", 1, MAX_CHANGES)
    if changes > horizon:
        raise ParameterError("max_changes", f"must be at most horizon_windows ({horizon})")
    return horizon, changes
