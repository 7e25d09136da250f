"""Campaign kinds (client/campaign_kinds.py): one tagged variant per mechanism family, built
from the flat JSON a config has always had, so every config keeps its id.

kind_configs.json was written by the code before the kinds existed (commit 7217402, one
CampaignConfig class with optional fields): for configs of every kind, their canonical JSON,
id and legacy id as created, and for invalid configs the field and reason of the error.
Two cases were written again since: cat-auto and cat-auto-limit record SHE's variance, which
was a BLAS dot product whose last bit depended on the CPU and is now exact in integers
(client/oracles/histogram.py), so their ids are the same on every machine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.campaign_kinds import (
    KINDS,
    Breakdown,
    Categorical,
    Discovery,
    Numeric,
    OpenDomain,
    kind_of,
)
from ldptel.client.errors import ParameterError

CASES = json.loads((Path(__file__).parent / "kind_configs.json").read_text(encoding="utf-8"))
#: A case's kind, by its name's prefix (the cases are named so).
PREFIXES = {"cat": Categorical, "open": OpenDomain, "pem": Discovery, "num": Numeric}


@pytest.mark.parametrize("case", CASES["valid"], ids=lambda c: c["input"]["name"])
def test_every_kind_keeps_the_canonical_json_and_ids_it_had(case: dict[str, Any]) -> None:
    config = CampaignConfig.from_dict(case["input"]).as_created()
    assert isinstance(config.kind, PREFIXES[case["input"]["name"].split("-")[0]])
    assert config.canonical_json() == case["canonical"]
    assert (config.config_id, config.legacy_config_id) == (
        case["config_id"],
        case["legacy_config_id"],
    )
    stored = CampaignConfig.from_dict(json.loads(case["canonical"]), stored=True)
    assert stored == config and stored.config_id == case["config_id"]


@pytest.mark.parametrize("case", CASES["invalid"], ids=lambda c: "-".join(c["error"])[:60])
def test_invalid_configs_give_the_errors_they_gave(case: dict[str, Any]) -> None:
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict(case["input"])
    assert [error.value.field, error.value.reason] == case["error"]


def test_each_kind_is_a_frozen_keyword_only_dataclass() -> None:
    for kind in KINDS:
        assert dataclasses.is_dataclass(kind)
        params = vars(kind)["__dataclass_params__"]
        assert params.frozen
        assert all(f.kw_only for f in dataclasses.fields(kind))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Numeric(range=(0.0, 1.0)).range = (0.0, 2.0)  # type: ignore[misc]


def test_a_config_is_of_the_first_kind_that_claims_it() -> None:
    assert kind_of({"range": [0, 1]}) is Numeric
    assert kind_of({"max_length": 8, "oracle": "pem"}) is Discovery
    assert kind_of({"max_length": 8, "oracle": "cms"}) is OpenDomain
    assert kind_of({"domain": ["a", "b"]}) is Categorical


def test_what_a_kind_does_not_have_reads_as_absent() -> None:
    text = CampaignConfig.from_dict({"name": "t", "oracle": "cms", "epsilon": 1, "max_length": 8})
    assert (text.domain, text.range, text.other_label, text.max_length) == ((), None, None, 8)
    number = CampaignConfig.from_dict({"name": "n", "oracle": "pm", "epsilon": 1, "range": [0, 9]})
    assert (number.domain, number.max_length, number.range) == ((), None, (0.0, 9.0))
    with pytest.raises(ParameterError, match="numeric"):
        number.build_oracle()


BREAKDOWN = {
    "name": "crashes",
    "oracle": "pairs",
    "epsilon": 2.0,
    "attributes": {"plan": ["free", "pro"], "os": ["android", "ios", "web"], "tier": ["a", "b"]},
}


def test_a_breakdown_serves_its_inner_oracles_and_keeps_one_attribute_order() -> None:
    created = CampaignConfig.from_dict(BREAKDOWN).as_created()
    assert isinstance(created.kind, Breakdown)
    assert created.kind.attributes.names == ("os", "plan", "tier")  # the JSON's key order
    served = created.params["inner"]
    assert [inner["oracle"] for inner in served] == ["de", "de", "de"]
    stored = CampaignConfig.from_dict(json.loads(created.canonical_json()), stored=True)
    assert stored == created and stored.config_id == created.config_id


def test_a_served_inner_oracle_that_promises_less_privacy_is_refused() -> None:
    created = json.loads(CampaignConfig.from_dict(BREAKDOWN).as_created().canonical_json())
    inner = created["params"]["inner"][0]  # os x plan: 6 cells
    inner["p"] = 0.9
    inner["q"] = (1 - 0.9) / 5  # consistent, but e^eps = 45 > e^2
    with pytest.raises(ParameterError, match="epsilon"):
        CampaignConfig.from_dict(created)
