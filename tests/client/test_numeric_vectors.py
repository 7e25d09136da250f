"""Numeric mechanisms against their test vectors (docs/protocol.md, "Numeric campaigns";
tests/vectors/numeric.json): the real client path (clip, alpha-point rounding, the integer
law) fed the vectors' random draws gives their reports; the collector's validation accepts
them; the aggregator's support and mean match."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.numeric import NumericMechanism
from ldptel.client.numeric.hm import Hybrid

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "numeric.json").read_text())
MECHANISMS = VECTORS["mechanisms"]


class ScriptedDraws:
    """An Rng whose uniform integers are given: each `integers(0, bound, size)` call must ask
    for the next draws' bound, and returns them."""

    def __init__(self, draws: list[tuple[int, int]]) -> None:
        self.draws = list(draws)  # (bound, value)

    def integers(self, low: int, high: int, size: int, dtype: Any = np.int64) -> Any:
        assert low == 0 and size >= 1
        taken, self.draws = self.draws[:size], self.draws[size:]
        assert [bound for bound, _ in taken] == [high] * size, (taken, high)
        assert all(0 <= value < high for _, value in taken)
        return np.array([value for _, value in taken], dtype=dtype)


def mechanism_of(vectors: dict[str, Any]) -> NumericMechanism:
    config = dict(vectors["config"])
    data = {
        "name": "v",
        "oracle": config.pop("oracle"),
        "epsilon": config.pop("epsilon"),
        "range": config.pop("range"),
        "params": config,
    }
    return CampaignConfig.from_dict(data).build_numeric()


def code_order(case: dict[str, Any], mechanism: NumericMechanism) -> list[tuple[int, int]]:
    """The vector's draws in the order this code makes them: hm draws Duchi's bit for every
    report, then PM's for the reports that use PM."""
    draws = [(d["below"], d["u"]) for d in case["draws"]]
    if not isinstance(mechanism, Hybrid) or draws[1][0] == mechanism.duchi.total:
        return draws
    return [draws[0], (mechanism.duchi.total, 0), draws[1]]


@pytest.mark.parametrize("vectors", MECHANISMS, ids=[m["config"]["oracle"] for m in MECHANISMS])
def test_the_client_path_maps_the_vectors_draws_to_their_reports(vectors: dict[str, Any]) -> None:
    mechanism = mechanism_of(vectors)
    for case in vectors["cases"]:
        alpha = np.array([case["alpha"]], dtype=np.uint64)
        assert mechanism.round_levels(np.array([case["value"]]), alpha)[0] == case["level"]
        draws = [(2**64, case["alpha"]), *code_order(case, mechanism)]
        rng = ScriptedDraws(draws)
        batch = mechanism.perturb_batch(np.array([case["value"]]), rng)  # type: ignore[arg-type]
        assert mechanism.encode(batch) == [case["report"]], case
        assert rng.draws == []


@pytest.mark.parametrize("vectors", MECHANISMS, ids=[m["config"]["oracle"] for m in MECHANISMS])
def test_the_aggregator_counts_and_estimates_the_vectors_batch(vectors: dict[str, Any]) -> None:
    mechanism = mechanism_of(vectors)
    reports = vectors["batch"]["reports"]
    batch = mechanism.decode(reports)  # the collector's validation accepts them
    support = mechanism.support(mechanism.unpack(mechanism.pack(batch), len(reports)))
    assert support.tolist() == vectors["batch"]["support"]
    assert mechanism.mean(support, len(reports)) == pytest.approx(
        vectors["batch"]["mean"], rel=1e-12, abs=1e-9
    )
    # The stated variance of the mean, and SW's EMS, as docs/protocol.md states them.
    assert mechanism.mean_variance_estimate(support, len(reports)) == pytest.approx(
        vectors["batch"]["variance"], rel=1e-12
    )
    if "distribution" in vectors["batch"]:
        estimated = mechanism.distribution(support, len(reports))
        assert estimated.raw.tolist() == pytest.approx(
            vectors["batch"]["distribution"], rel=1e-9, abs=1e-12
        )
