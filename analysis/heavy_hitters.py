"""Heavy-hitter discovery simulated on a list of values (one per user) through the real
client code (ldptel.client.discovery), with recall and precision against the true counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.audit import exact_audit
from ldptel.analysis.simulation import Progress, simulate_support
from ldptel.client.discovery import Discovery, PrefixExtendingMethod
from ldptel.client.discovery.pem import DEFAULT_FALSE_DISCOVERIES
from ldptel.client.errors import ParameterError
from ldptel.client.samplers import sample_uniform_below


@dataclass(frozen=True)
class HeavyHitterSimulation:
    """A discovery beside the truth: recall over the strings whose true count is at least
    the threshold, precision over the strings listed (the same set counts as right)."""

    discovery: Discovery
    true_counts: dict[str, int]

    def true(self, value: str) -> int:
        return self.true_counts.get(value, 0)

    @property
    def heavy(self) -> set[str]:
        """The strings whose true count is at least the threshold."""
        cut = self.discovery.threshold
        return {value for value, count in self.true_counts.items() if count >= cut}

    @property
    def recall(self) -> float | None:
        heavy = self.heavy
        found = heavy.intersection(self.discovery.values)
        return len(found) / len(heavy) if heavy else None

    @property
    def precision(self) -> float | None:
        listed = self.discovery.values
        return len(self.heavy.intersection(listed)) / len(listed) if listed else None


def group_supports(
    pem: PrefixExtendingMethod,
    values: Sequence[str],
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[list[NDArray[np.int64]], list[int]]:
    """Each user draws a group as the client does and reports its value's prefix through
    the group's sketch oracle; returns each group's summed support and report count."""
    vocabulary = list(dict.fromkeys(values))
    index = {value: i for i, value in enumerate(vocabulary)}
    users = np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
    groups = sample_uniform_below(rng, pem.groups, users.size)
    # counts[g, v]: users of group g holding vocabulary[v].
    counts = np.bincount(groups * len(vocabulary) + users, minlength=pem.groups * len(vocabulary))
    counts = counts.reshape(pem.groups, len(vocabulary))
    bits = [pem.prefix(value, pem.groups - 1) for value in vocabulary]  # checks every value
    supports, done = [], 0
    for group, length in enumerate(pem.lengths):
        labels = list(dict.fromkeys(b[:length] for b in bits))
        at = {label: i for i, label in enumerate(labels)}
        label_of = np.fromiter((at[b[:length]] for b in bits), dtype=np.int64, count=len(bits))
        if len(labels) == 1:  # an oracle's domain has >= 2 items: add one nobody holds
            labels.append(("1" if labels[0][0] == "0" else "0") + labels[0][1:])
        label_counts = np.bincount(label_of, weights=counts[group], minlength=len(labels))
        size = int(counts[group].sum())

        def step(finished: int, total: int, before: int = done) -> None:
            if progress is not None:
                progress(before + finished, users.size)

        oracle = pem.group_oracle(labels)
        supports.append(simulate_support(oracle, label_counts.astype(np.int64), rng, step))
        done += size
    return supports, [int(c) for c in counts.sum(axis=1)]


def simulate_discovery(
    pem: PrefixExtendingMethod,
    values: Sequence[str],
    rng: np.random.Generator,
    false_discoveries: float = DEFAULT_FALSE_DISCOVERIES,
    progress: Progress | None = None,
) -> HeavyHitterSimulation:
    """The users holding `values` report through PEM; the server discovers heavy hitters."""
    if not values:
        raise ParameterError("values", "need at least one value")
    supports, sizes = group_supports(pem, values, rng, progress)
    discovery = pem.discover(supports, sizes, false_discoveries)
    return HeavyHitterSimulation(discovery, dict(Counter(values)))


def exact_report_loss(pem: PrefixExtendingMethod, value: str, other: str) -> float:
    """The exact privacy loss of one PEM report between two values of a user: the report
    is (g, r) with g uniform and independent of the value, so an event (g, e) has
    probability P[e | prefix_g(value)] / G, and the loss is the largest over the groups of
    the group oracle's exact loss between the two prefixes (0 where they are equal: the
    same law)."""
    losses = [0.0]
    for group in range(pem.groups):
        labels = [pem.prefix(value, group), pem.prefix(other, group)]
        if labels[0] != labels[1]:
            exact = exact_audit(pem.group_oracle(labels), [(0, 1)])
            losses.append(exact.epsilon)
    return max(losses)
