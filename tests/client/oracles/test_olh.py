"""OLH: its g (default, validation), the registry and campaign wiring, and test vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lh_vectors import check_case

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.base import MAX_EPSILON
from ldptel.client.oracles.local_hashing import MAX_G
from ldptel.client.oracles.olh import OptimizedLocalHashing, optimal_g
from ldptel.client.randomness import SecureRandom

VECTORS = Path(__file__).parents[2] / "vectors" / "olh.json"


@pytest.mark.parametrize(("eps", "g"), [(0.1, 2), (1.0, 4), (2.0, 8), (3.0, 21), (4.0, 56)])
def test_default_g_is_round_e_to_the_eps_plus_one(eps: float, g: int) -> None:
    assert optimal_g(eps) == g
    assert OptimizedLocalHashing(epsilon=eps, domain_size=10).g == g


def test_default_g_is_capped_at_the_wire_limit() -> None:
    assert optimal_g(30.0) == MAX_G == 2**32 - 1
    # The largest epsilon an oracle accepts stays below the cap, with its exact guarantee.
    oracle = OptimizedLocalHashing(epsilon=MAX_EPSILON, domain_size=4)
    assert oracle.g == round(math.exp(MAX_EPSILON) + 1) < MAX_G
    assert oracle.epsilon == pytest.approx(MAX_EPSILON, rel=1e-9)


@pytest.mark.parametrize(("eps", "g"), [(40.0, 2), (1000.0, None)])
def test_an_epsilon_whose_p_would_round_to_1_is_rejected(eps: float, g: int | None) -> None:
    # With p == 1.0 in floating point, perturb_batch would never randomize.
    with pytest.raises(ParameterError, match=r"^epsilon: must be <= 20"):
        OptimizedLocalHashing(epsilon=eps, domain_size=4, g=g)


@pytest.mark.parametrize("g", [0, 1, -3, 2**32, 2.5, True, "4", None])
def test_g_is_validated(g: object) -> None:
    if g is None:  # None means the default, not an error
        assert OptimizedLocalHashing(epsilon=1.0, domain_size=8, g=None).g == 4
        return
    with pytest.raises(ParameterError, match=r"^g: "):
        OptimizedLocalHashing(epsilon=1.0, domain_size=8, g=g)  # type: ignore[arg-type]


@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_any_integer_g_is_accepted_exactly_in_its_range(g: int) -> None:
    if 2 <= g <= MAX_G:
        assert OptimizedLocalHashing(epsilon=1.0, domain_size=2, g=g).g == g
    else:
        with pytest.raises(ParameterError, match="g"):
            OptimizedLocalHashing(epsilon=1.0, domain_size=2, g=g)


@given(st.floats(min_value=1e-3, max_value=MAX_EPSILON), st.integers(min_value=2, max_value=10**6))
def test_epsilon_is_the_requested_one_for_any_g(eps: float, g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=eps, domain_size=2, g=g)
    p = oracle.p
    # The guarantee is computed from the floating-point p; it moves from the requested
    # epsilon only by p's rounding (a few ulps), amplified by d eps / d p = 1 / (p (1-p)).
    assert abs(oracle.epsilon - eps) <= 8 * 2**-53 / (p * (1 - p)) + 1e-12 * eps
    assert 0 < oracle.q_star < oracle.p_star < 1


def test_registry_and_campaign_build_olh_with_the_domain_as_labels() -> None:
    assert make_oracle("olh", epsilon=1.0, domain_size=5).name == "olh"
    config = CampaignConfig.from_dict(
        {
            "name": "fruit",
            "oracle": "olh",
            "epsilon": 2.0,
            "domain": ["a", "b", "c"],
            "params": {"g": 5},
        }
    )
    oracle = config.build_oracle()
    assert isinstance(oracle, OptimizedLocalHashing)
    assert (oracle.g, oracle.labels) == (5, ["a", "b", "c"])
    with pytest.raises(ParameterError, match="g"):
        CampaignConfig.from_dict(
            {
                "name": "fruit",
                "oracle": "olh",
                "epsilon": 2.0,
                "domain": ["a", "b"],
                "params": {"g": 1},
            }
        )


def test_vectors() -> None:
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    assert document["oracle"] == "olh"
    for case in document["cases"]:
        labels = case["domain"]
        oracle = OptimizedLocalHashing(
            epsilon=case["epsilon"], domain_size=len(labels), g=case["g"], labels=labels
        )
        assert oracle.p_star == pytest.approx(case["p"], rel=1e-12)
        check_case(oracle, case)


def test_one_report_from_the_os_csprng_has_the_exact_law(monkeypatch) -> None:
    # The SDK's scalar path: the true bucket with probability p, each other bucket q.
    from scipy import stats

    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=8)
    reports = [oracle.perturb(5, SecureRandom()) for _ in range(40_000)]
    seeds = np.array([r["seed"] for r in reports], dtype=np.uint32)
    truth = oracle.buckets(np.full(seeds.size, 5), seeds)
    offset = (np.array([r["y"] for r in reports]) - truth) % oracle.g  # 0: kept
    expected = np.array([oracle.p] + [oracle.q_other] * (oracle.g - 1)) * len(reports)
    assert stats.chisquare(np.bincount(offset, minlength=oracle.g), expected).pvalue > 1e-6
