"""BLH: local hashing into two buckets; its parameters, registry wiring and test vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from lh_vectors import check_case

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.blh import BinaryLocalHashing

VECTORS = Path(__file__).parents[2] / "vectors" / "blh.json"


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_blh_is_randomized_response_on_one_hashed_bit(eps: float) -> None:
    oracle = BinaryLocalHashing(epsilon=eps, domain_size=16)
    e = math.exp(eps)
    assert oracle.g == 2
    assert oracle.p_star == pytest.approx(e / (e + 1), rel=1e-12)
    assert oracle.q_star == 0.5
    assert oracle.epsilon == pytest.approx(eps, rel=1e-12)
    batch = oracle.perturb_batch(np.arange(16).repeat(20), np.random.default_rng(1))
    assert set(batch["y"].tolist()) <= {0, 1}


def test_blh_takes_no_g() -> None:
    with pytest.raises(TypeError):
        BinaryLocalHashing(epsilon=1.0, domain_size=4, g=3)  # type: ignore[call-arg]
    with pytest.raises(ParameterError, match="params"):
        CampaignConfig.from_dict(
            {"name": "x", "oracle": "blh", "epsilon": 1.0, "domain": ["a", "b"], "params": {"g": 3}}
        )


@pytest.mark.parametrize("report", [{"seed": 5, "y": 2}, {"seed": 5, "y": True}])
def test_a_bit_is_0_or_1(report: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"reports\[0\]\.y"):
        BinaryLocalHashing(epsilon=1.0, domain_size=4).decode([report])


def test_registry_and_campaign_build_blh_with_the_domain_as_labels() -> None:
    assert isinstance(make_oracle("blh", epsilon=1.0, domain_size=3), BinaryLocalHashing)
    config = CampaignConfig.from_dict(
        {"name": "apps", "oracle": "blh", "epsilon": 1.0, "domain": ["mail", "maps"]}
    )
    oracle = config.build_oracle()
    assert isinstance(oracle, BinaryLocalHashing)
    assert oracle.labels == ["mail", "maps"]


def test_vectors() -> None:
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    assert document["oracle"] == "blh"
    for case in document["cases"]:
        labels = case["domain"]
        oracle = BinaryLocalHashing(epsilon=case["epsilon"], domain_size=len(labels), labels=labels)
        assert oracle.p_star == pytest.approx(case["p"], rel=1e-12)
        check_case(oracle, case)
