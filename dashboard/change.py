"""The change of every item between two windows: the difference of the unbiased estimates,
its standard error from the exact variances, and a flag only where it is significant.

The two windows' reports are independent randomizations (memoization "none": every report
draws fresh randomness, client/ledger.py), so Var(e2 - e1) = Var(e2) + Var(e1) given the
users' values. The flag is a two-sided test of "no change" at level false_flags / d per item
(Bonferroni over the d items compared), so that at most `false_flags` items are expected to
be flagged over the whole domain when nothing changed: the per-window rule of
aggregator/reports/statistics.py (significance_z) applied to both tails, i.e. at 2d one-sided tests.
Under exact memoization a user's reports repeat across windows, the variances do not add and
nothing is flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.reports import significance_z
from ldptel.client.memoization import MEMO_NONE
from ldptel.dashboard.series import Numbers


@dataclass(frozen=True)
class Change:
    """Per item present in both windows: difference, its stderr, z and the flag."""

    items: tuple[str, ...]
    before: NDArray[np.float64]
    after: NDArray[np.float64]
    difference: NDArray[np.float64]
    stderr: NDArray[np.float64]
    z: NDArray[np.float64]
    significant: NDArray[np.bool_]
    #: The |z| above which a change is flagged (inf: no test, see `untested`).
    threshold: float
    false_flags: float
    #: Why no item is tested, or "" when they are.
    untested: str

    @property
    def flagged(self) -> int:
        return int(self.significant.sum())


def change(before: Numbers, after: Numbers) -> Change:
    """The change from `before` to `after`, over the items both reports hold."""
    common = [item for item in after.items if before.position(item) is not None]
    old = np.array([before.position(item) for item in common], dtype=np.int64)
    new = np.array([after.position(item) for item in common], dtype=np.int64)
    difference = after.estimate[new] - before.estimate[old]
    stderr = np.sqrt(after.variance[new] + before.variance[old])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(stderr > 0, difference / stderr, 0.0)
    false_flags = after.false_flags
    untested = untested_reason(before, after)
    threshold = significance_z(2 * len(common), false_flags) if common else math.inf
    if untested:
        threshold = math.inf
    return Change(
        items=tuple(common),
        before=before.estimate[old],
        after=after.estimate[new],
        difference=difference,
        stderr=stderr,
        z=z,
        significant=np.abs(z) > threshold,
        threshold=threshold,
        false_flags=false_flags,
        untested=untested,
    )


def untested_reason(before: Numbers, after: Numbers) -> str:
    """Why the two reports cannot be compared by the test above ("" if they can)."""
    if not (before.ok and after.ok):
        return "a window has too few reports"
    if before.memoization != MEMO_NONE or after.memoization != MEMO_NONE:
        return "reports are memoized across windows, so their variances do not add"
    return ""
