"""SUE, basic one-time RAPPOR (Wang et al., USENIX Security 2017, Sec. 4.2): its parameters,
its name and alias, and unbiased estimates at a small q (large eps; the contract tests run
larger ones)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from contract_checks import check_unbiased, check_variance, known_counts, repeat_estimates
from hypothesis import given
from hypothesis import strategies as st

from ldptel.client.errors import ParameterError
from ldptel.client.oracles import make_oracle, oracle_class
from ldptel.client.oracles.base import MAX_EPSILON
from ldptel.client.oracles.sue import SymmetricUnaryEncoding


def test_rappor_basic_is_sue() -> None:
    assert oracle_class("rappor-basic") is oracle_class("sue") is SymmetricUnaryEncoding


def test_parameters_and_variance_follow_the_paper() -> None:
    oracle = make_oracle("sue", epsilon=1.5, domain_size=40)
    half = math.exp(0.75)
    assert oracle.p == pytest.approx(half / (half + 1), rel=1e-15)
    assert oracle.q == pytest.approx(1 - oracle.p, rel=1e-14)
    # Var / n with f_v = 0: e^(eps/2) / (e^(eps/2) - 1)^2 (Wang et al. 2017, eq. (10)).
    assert oracle.variance(1000) == pytest.approx(np.full(40, 1000 * half / (half - 1) ** 2))


# Up to MAX_EPSILON (20): beyond, 1 - p (~e^(-eps/2)) keeps fewer digits in a double, and the
# epsilon of the rounded p the sampler really uses drifts from the requested one.
@given(st.floats(min_value=1e-3, max_value=MAX_EPSILON))
def test_the_guaranteed_epsilon_is_the_requested_one(epsilon: float) -> None:
    oracle = make_oracle("sue", epsilon=epsilon, domain_size=3)
    assert oracle.epsilon == pytest.approx(epsilon, rel=1e-9)


def test_a_huge_epsilon_is_rejected_and_the_largest_accepted_is_exact() -> None:
    # Past MAX_EPSILON q would round to 0 (an infinite epsilon, or an overflow).
    with pytest.raises(ParameterError, match=r"^epsilon: must be <= 20"):
        make_oracle("sue", epsilon=2000.0, domain_size=3)
    oracle = make_oracle("sue", epsilon=MAX_EPSILON, domain_size=3)
    assert oracle.q > 0 and oracle.epsilon == pytest.approx(MAX_EPSILON, rel=1e-9)


def test_estimates_at_a_small_q_are_unbiased_with_the_exact_variance() -> None:
    oracle = make_oracle("sue", epsilon=8.0, domain_size=64)
    assert oracle.q < 5 / 256  # the first base-256 digit of q is 4: most 1s need a 2nd byte
    reps = repeat_estimates(oracle, known_counts(2_000, 64), 200, seed=31)
    check_unbiased(reps)
    check_variance(reps)
