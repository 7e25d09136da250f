"""Numeric campaigns at the collector: created with a range (no domain), served to clients,
their reports validated by the campaign's mechanism (JSON 400 naming the field) and stored as
ordinary stream entries (ldptel.store.codec)."""

from __future__ import annotations

from typing import Any

import pytest
from collector_api import Api

from ldptel.client.campaign import CampaignConfig
from ldptel.store import codec, keys

LATENCY = {"name": "latency", "oracle": "duchi", "epsilon": 1.0, "range": [0, 2000]}


def error_of(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["field"]


def test_a_numeric_campaign_is_served_with_its_range_and_written_parameters(api: Api) -> None:
    config_id = api.create_campaign(LATENCY)

    served = api.session.get(f"{api.url}/v1/campaigns/latency").json()
    assert served["config_id"] == config_id and served["range"] == [0, 2000]
    assert "domain" not in served and {"resolution", "step", "base"} <= set(served["params"])
    del served["config_id"]
    assert CampaignConfig.from_dict(served).config_id == config_id


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"range": [5, 5]}, "range"),
        ({"range": [0, float("inf")]}, "range"),  # not JSON: sent as a string below
        ({"range": [0]}, "range"),
        ({"range": ["0", 1]}, "range"),
        ({"domain": ["a", "b"]}, "domain"),
        ({"oracle": "de"}, "oracle"),
        ({"levels": {"high": 0.5}}, "levels"),
        ({"params": {"resolution": 0}}, "resolution"),
    ],
)
def test_a_bad_numeric_config_is_refused_naming_the_field(
    api: Api, changes: dict[str, Any], field: str
) -> None:
    config = {**LATENCY, **changes}
    if config["range"] == [0, float("inf")]:
        config["range"] = [0, "Infinity"]
    response = api.session.post(f"{api.url}/v1/campaigns", json=config, headers=api.admin())
    assert error_of(response) == (400, field)


def test_numeric_reports_are_validated_and_stored_as_stream_entries(
    api: Api, redis_client: Any
) -> None:
    config_id = api.create_campaign(LATENCY)
    token = api.create_token()
    body = {"campaign": "latency", "config_id": config_id, "reports": [{"y": 0}, {"y": 1}]}

    assert api.post_reports(token, body).status_code == 202
    ((_, fields),) = redis_client.xrange(keys.stream("latency", 0))
    entry = codec.decode(fields)
    mechanism = CampaignConfig.from_dict(LATENCY).as_created().build_numeric()
    assert entry.n == 2 and mechanism.encode(mechanism.unpack(entry.packed, 2)) == body["reports"]

    for reports, field in [
        ([{"y": 2}], "reports[0].y"),  # a one-bit mechanism's codes are 0 and 1
        ([{"y": 1}, {"y": 0.5}], "reports[1].y"),
        ([{"y": 1, "x": 3.7}], "reports[0].x"),  # a raw value is never accepted
        ([{"value": 3.7}], "reports[0].value"),
    ]:
        response = api.post_reports(token, {**body, "reports": reports})
        assert error_of(response) == (400, field), reports
        assert response.headers["Content-Type"].startswith("application/json")
    assert len(redis_client.xrange(keys.stream("latency", 0))) == 1
