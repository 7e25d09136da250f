"""Parameter validation, for every registered oracle (property tests): bad epsilon or domain
size raises ParameterError naming the field; good ones construct an oracle that guarantees
no more than the requested epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldptel.analysis.simulation import build_oracle
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import ORACLES
from ldptel.client.oracles.base import MAX_EPSILON

NAMES = sorted(ORACLES)
EXAMPLES = settings(max_examples=40, deadline=None)

not_a_number = st.one_of(
    st.booleans(), st.none(), st.text(max_size=5), st.lists(st.integers(), max_size=2)
)
bad_epsilons = st.one_of(
    st.floats(max_value=0.0, allow_nan=False),
    st.integers(max_value=0),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    not_a_number,
)
bad_domain_sizes = st.one_of(
    st.integers(max_value=1),
    st.floats(allow_nan=True),  # floats are not sizes, even 16.0
    not_a_number,
)
good_epsilons = st.floats(min_value=0.05, max_value=8.0)
good_domain_sizes = st.integers(min_value=2, max_value=300)


@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(epsilon=bad_epsilons, domain_size=good_domain_sizes)
def test_a_bad_epsilon_is_rejected_naming_epsilon(
    name: str, epsilon: object, domain_size: int
) -> None:
    with pytest.raises(ParameterError) as caught:
        build_oracle(name, epsilon=epsilon, domain_size=domain_size)  # type: ignore[arg-type]
    assert caught.value.field == "epsilon"


@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(epsilon=good_epsilons, domain_size=bad_domain_sizes)
def test_a_bad_domain_size_is_rejected_naming_domain_size(
    name: str, epsilon: float, domain_size: object
) -> None:
    with pytest.raises(ParameterError) as caught:
        build_oracle(name, epsilon=epsilon, domain_size=domain_size)  # type: ignore[arg-type]
    assert caught.value.field == "domain_size"


@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(epsilon=good_epsilons, domain_size=good_domain_sizes)
def test_good_parameters_build_an_oracle_within_the_requested_epsilon(
    name: str, epsilon: float, domain_size: int
) -> None:
    oracle = build_oracle(name, epsilon=epsilon, domain_size=domain_size)
    assert oracle.domain_size == domain_size
    assert 0 < oracle.epsilon <= epsilon + 1e-9


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [MAX_EPSILON * (1 + 1e-12), 36.0, 1000.0, 1e300])
def test_an_epsilon_above_the_maximum_is_rejected_naming_epsilon(name: str, epsilon: float) -> None:
    # Not an overflow, a division by zero, or an oracle that silently guarantees infinity.
    with pytest.raises(ParameterError, match=r"must be <= 20") as caught:
        build_oracle(name, epsilon=epsilon, domain_size=8)
    assert caught.value.field == "epsilon"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("domain_size", [2, 3, 1024])
def test_the_largest_epsilon_is_guaranteed_exactly_with_a_finite_variance(
    name: str, domain_size: int
) -> None:
    oracle = build_oracle(name, epsilon=MAX_EPSILON, domain_size=domain_size)
    assert 0 < oracle.epsilon <= MAX_EPSILON * (1 + 1e-9)
    if oracle.exact_estimator:
        assert np.all(np.isfinite(oracle.variance(1000))) and np.all(oracle.variance(1000) >= 0)
