"""Key mechanisms (client/oracles/keys.py): an open-domain campaign's mechanism has no domain,
and the categorical hashing oracle of the same name is that mechanism with labels mapped to
their item keys: the same report of a label's text, the same estimate and exact variance."""

from __future__ import annotations

import numpy as np
import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_keys
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.base import ReportLog, ReportMechanism
from ldptel.client.oracles.keys import KeyedOracle, KeyMechanism
from ldptel.client.oracles.local_hashing import KeyLocalHashing
from ldptel.client.oracles.sketch import KeySketch

DOMAIN_PARTS = ("domain_size", "labels", "estimate", "variance", "perturb_batch", "audit_events")
PARAMS = {"cms": {"k": 16, "m": 64}, "hcms": {"k": 16, "m": 64}, "olh": {}}


def open_mechanism(name: str) -> KeyMechanism:
    data = {"name": "x", "oracle": name, "epsilon": 2.0, "max_length": 16, "params": PARAMS[name]}
    config = CampaignConfig.from_dict(data).as_created()
    mechanism = config.build_mechanism()
    assert mechanism is not None and isinstance(mechanism, KeyMechanism)
    assert type(mechanism) is type(config.build_open())
    return mechanism


@pytest.mark.parametrize("name", ["cms", "hcms", "olh"])
def test_an_open_domain_mechanism_has_no_domain(name: str) -> None:
    mechanism = open_mechanism(name)
    assert not isinstance(mechanism, KeyedOracle)
    assert [part for part in DOMAIN_PARTS if hasattr(mechanism, part)] == []
    if name == "olh":  # its state is the report log, not a support vector
        assert isinstance(mechanism, ReportLog) and not isinstance(mechanism, ReportMechanism)
    else:
        assert isinstance(mechanism, KeySketch) and mechanism.support_size > 0
    with pytest.raises(ParameterError):
        mechanism.perturb(3)  # a key mechanism's value is a string


@pytest.mark.parametrize("name", ["cms", "hcms", "olh"])
def test_the_categorical_oracle_is_the_key_mechanism_with_a_domain(name: str) -> None:
    mechanism = open_mechanism(name)
    labels = ["tea", "coffee", "mate"]
    params = {**mechanism.fixed_params(), **mechanism.derived_params()}
    oracle = make_oracle(name, epsilon=2.0, domain_size=3, labels=labels, **params)
    # The categorical sketch subclasses the open-domain one; OLH shares its local hashing.
    shared = KeyLocalHashing if name == "olh" else type(mechanism)
    assert isinstance(oracle, KeyedOracle) and isinstance(oracle, shared)
    # One law reached by the item key: the same draws give the same reports.
    values = np.array([0, 1, 2, 2, 1])
    by_label = oracle.perturb_batch(values, np.random.default_rng(4))
    by_key = mechanism.perturb_keys(
        item_keys([labels[v] for v in values]), np.random.default_rng(4)
    )
    assert mechanism.encode(by_key) == oracle.encode(by_label)
    f = np.array([0.5, 0.3, 0.2])
    assert np.array_equal(mechanism.key_variance(1000, f), oracle.variance(1000, f))
    if isinstance(mechanism, KeySketch):
        support = mechanism.support(by_key)
        keys = item_keys(labels)
        assert np.array_equal(
            mechanism.estimate_keys(support, 5, keys), oracle.estimate(support, 5)
        )
