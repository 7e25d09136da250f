"""The cap on a batch's text never refuses a valid batch: for every oracle, a batch of
perturbed reports, compact or pretty-printed, fits within the envelope plus `text_bytes`, and
its reports have only the fields `ReportForm.check` allows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import ORACLES
from ldptel.collector.errors import ApiError
from ldptel.collector.ingest import ENVELOPE_BYTES, ReportForm

N = 200


@pytest.mark.parametrize("oracle", sorted(ORACLES))
@pytest.mark.parametrize("indent", [None, 4])
def test_a_valid_batch_fits_its_campaigns_cap(oracle: str, indent: int | None) -> None:
    config = CampaignConfig.from_dict(
        {"name": "b", "oracle": oracle, "epsilon": 1.0, "domain": [f"v{i}" for i in range(40)]}
    )
    frequency_oracle = config.build_oracle()
    form = ReportForm.of(frequency_oracle)
    values = np.arange(N) % config.domain_size
    reports = frequency_oracle.encode(
        frequency_oracle.perturb_batch(values, np.random.default_rng(7))
    )
    body = {"campaign": "b" * 64, "config_id": "0" * 16, "level": "l" * 32, "reports": reports}
    separators = (",", ":") if indent is None else None
    text = json.dumps(body, indent=indent, separators=separators)
    assert len(text) <= ENVELOPE_BYTES + form.text_bytes(N)
    form.check(reports)


def test_an_unknown_field_inside_a_report_is_named() -> None:
    config = CampaignConfig.from_dict(
        {"name": "b", "oracle": "olh", "epsilon": 1.0, "domain": ["a", "b", "c"]}
    )
    form = ReportForm.of(config.build_oracle())
    assert form.keys == {"seed", "y"}
    with pytest.raises(ApiError) as refused:
        form.check([{"seed": 1, "y": 0}, {"seed": 1, "y": 0, "when": 1}])
    assert (refused.value.status, refused.value.field) == (400, "reports[1].when")
