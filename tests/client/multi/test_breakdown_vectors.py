"""Breakdown mechanisms against their test vectors (docs/breakdowns.md, "Wire form";
tests/vectors/breakdowns.json, computed without numpy or ldptel by make_breakdowns.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.client.multi import BREAKDOWNS, Attributes, HadamardBreakdown
from ldptel.client.multi.wire_flat import breakdown_reports

VECTORS = json.loads((Path(__file__).parents[2] / "vectors" / "breakdowns.json").read_text())


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda case: case["mechanism"])
def test_reports_give_the_vectors_marginal(case: dict[str, Any]) -> None:
    attributes = Attributes.from_config(VECTORS["attributes"])
    mechanism = BREAKDOWNS[case["mechanism"]](epsilon=case["epsilon"], attributes=attributes)
    assert [o.name for o in mechanism.inners] == [i["oracle"] for i in case["inner"]]
    for oracle, inner in zip(mechanism.inners, case["inner"], strict=True):
        assert (oracle.p_star, oracle.q_star) == pytest.approx((inner["p"], inner["q"]), rel=1e-12)
    if "masks" in case:  # hadamard: its coefficients and its randomized response
        assert isinstance(mechanism, HadamardBreakdown)
        assert mechanism.masks.tolist() == case["masks"]
        assert mechanism.p == pytest.approx(case["p"], rel=1e-12)
    state = breakdown_reports(mechanism).state(case["reports"])
    marginal = mechanism.marginal(state, attributes.positions(case["marginal"]["attributes"]))
    expected = case["marginal"]["cells"]
    np.testing.assert_allclose(marginal.estimate, [c["estimate"] for c in expected], rtol=1e-12)
    np.testing.assert_allclose(marginal.variance, [c["variance"] for c in expected], rtol=1e-12)
