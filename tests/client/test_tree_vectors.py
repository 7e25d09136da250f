"""Memoization "tree" against tests/vectors/tree.json (computed from docs/protocol.md by
tests/vectors/make_tree.py, not by ldptel): levels, read levels, prefix decompositions, an
install's node signs, the estimator and the storage form."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldptel.client import tree
from ldptel.client.tree import TreeShape, TreeState
from ldptel.client.tree_wire import TreeReports

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "tree.json").read_text())


@pytest.mark.parametrize("case", VECTORS["horizons"], ids=lambda c: str(c["horizon_windows"]))
def test_levels_read_levels_and_decompositions(case: dict[str, object]) -> None:
    windows = case["horizon_windows"]
    assert isinstance(windows, int)
    shape = TreeShape(windows, 1, 1.0)
    assert shape.levels == case["levels"]
    assert [shape.read_level(t) for t in range(min(windows, 16))] == case["read_level"]
    assert [list(n) for n in shape.decomposition(windows - 1)] == case["decomposition_of_last"]


@pytest.mark.parametrize("case", VECTORS["installs"], ids=lambda c: f"{c['level']}-{c['change']}")
def test_an_installs_node_signs(case: dict[str, object]) -> None:
    shape = TreeShape(16, 3, 1.0)
    state = TreeState(0, int(case["level"]), int(case["change"]))  # type: ignore[call-overload]
    found = {}
    for t, value in enumerate(case["history"]):  # type: ignore[arg-type]
        state = shape.observe(state, t, shape.indicator(state, value))
        sign = tree.node_sign(shape, state, t)
        if sign is not None:
            found[str(t)] = sign
    assert found == case["signs"]


def test_the_estimator() -> None:
    case = VECTORS["estimate"]
    shape = TreeShape(case["horizon_windows"], case["max_changes"], case["epsilon"])
    sums = dict(enumerate(case["node_sums"]))
    count = shape.estimate(sums, case["n"]) * case["n"]
    assert count == pytest.approx(case["count"], rel=1e-12)
    per_install = shape.variance(case["window"], 1, 0.0)
    assert per_install == pytest.approx(case["per_install_variance_at_f0"], rel=1e-12)


def test_the_storage_form() -> None:
    case = VECTORS["storage"]
    mechanism = TreeReports(TreeShape(365, 2, 1.0))
    batch = mechanism.decode(case["reports"])
    assert mechanism.pack(batch).hex() == case["packed_hex"]
    assert mechanism.encode(batch) == case["reports"]
    back = mechanism.unpack(bytes.fromhex(case["packed_hex"]), len(case["reports"]))
    assert all(np.array_equal(back[k], batch[k]) for k in batch)
