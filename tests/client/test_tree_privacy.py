"""Memoization "tree": the exact privacy loss between ANY two value histories of a horizon.

The law of one install's reports over a horizon, from the real code (ldptel.client.tree): the
initial draws' exact law (`initial_law`), the state after each window (`observe`), what each
window's bit randomizes (`node_sign`) and that bit's law (`bit_one_probability`). The item and
level are sent, so an output is (item, level, the bits of that level's read nodes); the change
index j is hidden, so its law is a mixture over j. The loss of a pair of histories is the
largest log-ratio over all outputs, computed exactly over every pair of histories of length
T = 4 and 8 (binary: all 2^T; categorical, d = 3: all 3^T at T = 4) for K = 1..3.

It is at most epsilon for every pair and exactly epsilon for some at T = 8 (tight); a
broken variant that randomizes every change of its node (not one sampled change) fails.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from ldptel.client import tree
from ldptel.client.tree import TreeShape, TreeState

EPSILON = 1.0


def output_laws(shape: TreeShape, history: tuple[int, ...]) -> dict[tuple[int, int], bytes]:
    """(item, level) -> the log-probabilities of every bit vector of that level's read
    nodes (rows of itertools.product), as bytes, the mixture over j taken."""
    by_output: dict[tuple[int, int], list[tuple[float, list[float]]]] = {}
    for weight, start in shape.initial_law():
        state, ones = start, []
        for t, value in enumerate(history):
            state = shape.observe(state, t, shape.indicator(state, value))
            sign = tree.node_sign(shape, state, t)
            if sign is not None:
                ones.append(shape.bit_one_probability(sign))
        by_output.setdefault((state.item, state.level), []).append((float(weight), ones))
    laws = {}
    for output, mixture in by_output.items():
        total = sum(w for w, _ in mixture)
        width = len(mixture[0][1])
        bits = np.array(list(itertools.product((0, 1), repeat=width)), dtype=np.float64)
        probability = np.zeros(len(bits))
        for w, ones in mixture:
            p = np.array(ones, dtype=np.float64)
            probability += (w / total) * np.prod(bits * p + (1 - bits) * (1 - p), axis=1)
        laws[output] = np.log(probability).tobytes()
    return laws


def largest_loss(shape: TreeShape, histories: list[tuple[int, ...]]) -> float:
    """max over pairs of histories and outputs of ln(P[out | h1] / P[out | h2])."""
    worst = 0.0
    by_output: dict[tuple[int, int], set[bytes]] = {}
    for history in histories:
        for output, law in output_laws(shape, history).items():
            by_output.setdefault(output, set()).add(law)
    for laws in by_output.values():
        rows: NDArray[np.float64] = np.array([np.frombuffer(law) for law in laws])
        # All ordered pairs at once: row i minus row j, maximized over outputs.
        worst = max(worst, float(np.max(rows[:, None, :] - rows[None, :, :])))
    return worst


#: (T, K) -> the exact worst loss at epsilon 1. Tight (= epsilon) when one output puts every
#: j's two nodes at opposite extremes, e.g. T = 8, K = 3: changes at windows 0, 2, 4 against
#: 2, 4, 6 with level-0 bits 1, 0, 1, 0; at T = 4 the level-0 tree reads only two nodes, so
#: for K >= 2 some j's nodes coincide and the mixture over j stays below epsilon.
WORST = {
    (4, 1): 1.0,
    (4, 2): 0.8279889392428694,
    (4, 3): 0.5115502064323387,
    (8, 1): 1.0,
    (8, 2): 1.0,
    (8, 3): 1.0,
}


@pytest.mark.parametrize(("horizon", "changes"), list(WORST))
def test_binary_histories_lose_at_most_epsilon_and_exactly_epsilon_at_worst(
    horizon: int, changes: int
) -> None:
    shape = TreeShape(horizon, changes, EPSILON)
    histories = list(itertools.product((0, 1), repeat=horizon))
    loss = largest_loss(shape, histories)
    assert loss <= EPSILON * (1 + 1e-9)
    assert loss == pytest.approx(WORST[horizon, changes], rel=1e-9)


@pytest.mark.parametrize("changes", [1, 2, 3])
def test_categorical_histories_with_a_sampled_item_lose_at_most_epsilon(changes: int) -> None:
    shape = TreeShape(4, changes, EPSILON, items=3)
    loss = largest_loss(shape, list(itertools.product((0, 1, 2), repeat=4)))
    # Given the (public) item, an indicator history: the binary case's worst loss.
    assert loss == pytest.approx(WORST[4, changes], rel=1e-9) and loss <= EPSILON * (1 + 1e-9)


def test_stable_values_and_many_changes_are_within_epsilon_at_a_longer_horizon() -> None:
    """T = 16 (5 levels; 2^8 outputs at level 0): stable histories, one change, past-K
    alternations."""
    shape = TreeShape(16, 2, EPSILON)
    histories = [
        (0,) * 16,
        (1,) * 16,
        (0,) * 10 + (1,) * 6,
        tuple(t % 2 for t in range(16)),
        tuple((t // 3) % 2 for t in range(16)),
    ]
    assert largest_loss(shape, histories) <= EPSILON * (1 + 1e-9)


def _every_change_of_the_node(history: tuple[int, ...]) -> Callable[..., int | None]:
    """The broken variant: the bit randomizes the node's net change (every change in it),
    not the one sampled change, as a tree over the values themselves would."""

    def sign(shape: TreeShape, state: TreeState, t: int) -> int | None:
        if state.level != shape.read_level(t):
            return None
        start = t + 1 - (1 << state.level)
        before = history[start - 1] if start else 0
        return history[t] - before

    return sign


def test_a_variant_that_does_not_sample_the_change_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shape = TreeShape(8, 2, EPSILON)
    histories = [(1, 1, 0, 0, 1, 1, 0, 0), (0,) * 8]
    laws = []
    for history in histories:
        monkeypatch.setattr(tree, "node_sign", _every_change_of_the_node(history))
        laws.append(output_laws(shape, history))
    rows = np.array([np.frombuffer(law[(0, 0)]) for law in laws])
    broken = float(np.max(rows[0] - rows[1]))
    assert broken == pytest.approx(4 * math.log(2 * shape.keep)) and broken > EPSILON
    monkeypatch.undo()
    assert largest_loss(shape, histories) <= EPSILON * (1 + 1e-9)  # the real code: within
