"""Exact privacy loss of one install's reports over a short value history.

Two ingredients, both from the real code:
- which reports share randomness: found by running the real `Randomizer` on the history
  (`shared_draws`): two reports that come out byte-identical in every one of many runs share
  one draw (a memo); for RAPPOR, the same with the IRR switched off (p = 0, q = 1), so the
  reports are the PRRs themselves. The sharing does not depend on p and q.
- the law of one draw: the oracle's exact event probabilities (`audit_probabilities`, which the
  privacy audit checks against `perturb_batch`); for RAPPOR, each bit's Bernoulli law given
  the cohort's Bloom bit (PRR with the code's quantized f, then IRR with p, q).

Reports in different groups are independent given the history (given the cohort, for
RAPPOR, whose cohort is public), so the largest likelihood ratio over all outputs of T
reports factors over groups (and over RAPPOR's bits): a sum of per-factor maxima.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.audit import _loss
from ldptel.client.oracles import FrequencyOracle
from ldptel.client.oracles.rappor import Rappor

#: Runs of the real code per history: a pair of fresh draws agrees by chance in all of them
#: with probability (P[two draws agree])^RUNS, below 1e-9 for every oracle at d <= 4.
RUNS = 40


def shared_draws(draw_history: Callable[[], list[str]], runs: int = RUNS) -> list[int]:
    """Group of each report: reports identical in every run of `draw_history` share a draw."""
    outputs = [draw_history() for _ in range(runs)]
    groups: list[int] = []
    for t in range(len(outputs[0])):
        same = [u for u in range(t) if all(run[u] == run[t] for run in outputs)]
        groups.append(groups[same[0]] if same else max(groups, default=-1) + 1)
    return groups


def _group_values(history: Sequence[int], groups: Sequence[int]) -> dict[int, int]:
    values: dict[int, int] = {}
    for value, group in zip(history, groups, strict=True):
        assert values.setdefault(group, value) == value, "a shared draw of two values"
    return values


def draw_loss(
    oracle: FrequencyOracle,
    history: Sequence[int],
    groups: Sequence[int],
    other: Sequence[int],
    other_groups: Sequence[int],
) -> float:
    """max over outputs of ln(P[out | history] / P[out | other]) for an oracle whose
    reports are draws shared as `groups` says. Different sharing: infinite (an output where
    two reports shared under one history differ has probability 0 under it)."""
    if list(groups) != list(other_groups):
        return math.inf
    mine, theirs = _group_values(history, groups), _group_values(other, other_groups)
    total = 0.0
    for group, value in mine.items():
        if value != theirs[group]:
            p = np.asarray(oracle.audit_probabilities(value, theirs[group]), dtype=np.float64)
            q = np.asarray(oracle.audit_probabilities(theirs[group], value), dtype=np.float64)
            total += _loss(p, q)
    return total


def _sequence_log_law(
    oracle: Rappor,
    bloom: NDArray[np.int64],
    history: Sequence[int],
    groups: Sequence[int],
    sequences: NDArray[np.int64],
) -> NDArray[np.float64]:
    """ln P[bit sequence] at one Bloom position, for every sequence (rows) of T bits:
    a product over PRR groups of a mixture over that group's PRR bit."""
    f, p, q = oracle.f, oracle.p, oracle.q
    total = np.zeros(len(sequences))
    for group, value in _group_values(history, groups).items():
        times = [t for t, g in enumerate(groups) if g == group]
        bits = sequences[:, times]
        ones = bits.sum(axis=1)
        zeros = len(times) - ones
        prr_one = 1 - f / 2 if bloom[value] else f / 2
        given_one = q**ones * (1 - q) ** zeros
        given_zero = p**ones * (1 - p) ** zeros
        total += np.log(prr_one * given_one + (1 - prr_one) * given_zero)
    return total


def rappor_loss(
    oracle: Rappor,
    history: Sequence[int],
    groups: Sequence[int],
    other: Sequence[int],
    other_groups: Sequence[int],
) -> float:
    """max over outputs (cohort, T reports of k bits) of ln(P[out | history] / P[out |
    other]): the cohort is uniform under both, and given it the k bit positions are
    independent, so the loss is max over cohorts of the sum over positions of the largest
    ratio over the 2^T bit sequences of that position."""
    sequences = np.array(list(itertools.product((0, 1), repeat=len(history))), dtype=np.int64)
    values = np.arange(oracle.domain_size)
    worst = -math.inf
    by_column: dict[bytes, float] = {}  # a position's loss depends only on its Bloom bits
    for cohort in range(oracle.m):
        bloom = oracle.bloom_bits(np.full(len(values), cohort), values)  # (d, k)
        total = 0.0
        for position in range(oracle.k):
            column = np.asarray(bloom[:, position], dtype=np.int64)
            key = column.tobytes()
            if key not in by_column:
                mine = _sequence_log_law(oracle, column, history, groups, sequences)
                theirs = _sequence_log_law(oracle, column, other, other_groups, sequences)
                by_column[key] = float(np.max(mine - theirs))
            total += by_column[key]
        worst = max(worst, total)
    return worst


def history_loss(
    oracle: FrequencyOracle,
    history: Sequence[int],
    groups: Sequence[int],
    other: Sequence[int],
    other_groups: Sequence[int],
) -> float:
    """The privacy loss between two histories: the larger of both directions."""
    loss = rappor_loss if isinstance(oracle, Rappor) else draw_loss
    return max(
        loss(oracle, history, groups, other, other_groups),  # type: ignore[arg-type]
        loss(oracle, other, other_groups, history, groups),  # type: ignore[arg-type]
    )
