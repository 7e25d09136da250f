"""A numeric config's explicit parameters never guarantee less than its epsilon: every
guarantee-setting integer, at its extremes and at the boundary, either is refused naming
`params.<field>` and the epsilon it gives, or builds a law whose exact privacy loss (from the
real code's integer weights, over every pair of levels) is at most the config's epsilon."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ldptel.analysis.audit import exact_audit
from ldptel.analysis.numeric import LevelLaw
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError

EPSILON = 1.0
#: Integers a careless or hostile config might hold: the smallest, powers around the
#: defaults, the largest each parameter takes.
EXTREMES = (1, 2, 3, 100, 1_000, 2**20, 2**30, 2**40)
#: Per mechanism: its guarantee-setting parameters, each tried alone at every extreme.
PARAMETERS = {
    "duchi": ("step", "base"),
    "1bitmean": ("step", "base"),
    "pm": ("heavy", "light", "band"),
    "sw": ("heavy", "light", "band"),
    "hm": ("heavy", "light", "step", "base", "mix"),
    "dbitflip": ("heavy", "light", "sampled"),
}
RESOLUTION = 8  # small: the exact audit checks all 9 x 8 ordered pairs of levels


def config(oracle: str, **params: Any) -> CampaignConfig:
    data = {"name": "x", "oracle": oracle, "epsilon": EPSILON, "range": [0, 10]}
    return CampaignConfig.from_dict({**data, "params": {"resolution": RESOLUTION, **params}})


def exact_loss(built: CampaignConfig) -> float:
    mechanism = built.build_numeric()
    return exact_audit(LevelLaw(mechanism), mechanism.domain_size**2).epsilon


@pytest.mark.parametrize(
    ("oracle", "name", "value"),
    [(o, n, v) for o, names in PARAMETERS.items() for n in names for v in EXTREMES],
)
def test_each_explicit_integer_is_refused_or_keeps_the_epsilon(
    oracle: str, name: str, value: int
) -> None:
    try:
        built = config(oracle, **{name: value})
    except ParameterError as error:
        # Refused naming a parameter: itself (a range check), or one the loss depends on.
        # ("epsilon": no integer pair of that size realizes the epsilon, e.g. heavy = 2.)
        loss_params = (*PARAMETERS[oracle], "resolution")
        named = {name, "params", "epsilon", *(f"params.{p}" for p in loss_params)}
        assert error.field in named
        return
    assert exact_loss(built) <= EPSILON * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize(
    ("oracle", "params", "field", "given"),
    [
        # The three configs, created (201) and reported at 6.7-9.2 before.
        ("duchi", {"resolution": 8, "base": 1, "step": 100}, "params.base", math.log(801)),
        ("pm", {"resolution": 16, "heavy": 1000, "light": 1, "band": 4}, "params.light",
         math.log(1000)),
        ("dbitflip", {"resolution": 7, "sampled": 8, "heavy": 100, "light": 1}, "params.light",
         2 * math.log(100)),
        ("hm", {"mix": 0, "base": 1, "step": 100}, "params.base", None),
        ("sw", {"light": 1}, "params.light", None),
    ],
)  # fmt: skip
def test_a_weakened_config_is_refused_naming_the_parameter_and_its_epsilon(
    oracle: str, params: dict[str, int], field: str, given: float | None
) -> None:
    data = {"name": "x", "oracle": oracle, "epsilon": EPSILON, "range": [0, 10], "params": params}
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict(data)
    assert error.value.field == field
    assert "above the config's 1" in error.value.reason
    if given is not None:
        assert f"gives epsilon {given:.6g}" in error.value.reason


#: Small integers, so that one step of the loss-setting integer moves the loss past any
#: rounding slack: each mechanism's derived weight is then the boundary itself.
SMALL = {"heavy": 100, "step": 1}


@pytest.mark.parametrize("oracle", sorted(PARAMETERS))
def test_the_boundary_is_accepted_and_one_step_past_it_refused(oracle: str) -> None:
    # The derived integer is the weakest accepted case; one step weaker is refused.
    small = {name: value for name, value in SMALL.items() if name in PARAMETERS[oracle]}
    created = config(oracle, **small).as_created()
    assert exact_loss(created) <= EPSILON * (1 + 1e-9) + 1e-12
    params = dict(created.params)
    weakened = "light" if "light" in params else "base"  # ln(heavy / light), ln(1 + s K / base)
    params[weakened] -= 1
    with pytest.raises(ParameterError, match="above the config's") as error:
        config(oracle, **params)
    assert error.value.field == f"params.{weakened}"
