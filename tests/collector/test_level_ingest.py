"""Privacy levels at the door: a batch names one of its config's levels, its reports are
validated with that level's oracle, and the level is stored with the entry."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from collector_api import Api, campaign_config

from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys

LEVELS = {"high": 0.5, "medium": 1.0, "low": 2.0}
#: OLH derives g from epsilon, so each level has its own report range: g = 3, 4, 8.
LEVELED = campaign_config("leveled", oracle="olh", epsilon=2.0, levels=LEVELS)


def error_of(response: requests.Response) -> tuple[int, str, str]:
    body = response.json()["error"]
    return response.status_code, body["field"], body["reason"]


def post(api: Api, token: str, config_id: str, level: str | None, ys: list[int]) -> Any:
    body: dict[str, Any] = {
        "campaign": "leveled",
        "config_id": config_id,
        "reports": [{"seed": 7, "y": y} for y in ys],
    }
    if level is not None:
        body["level"] = level
    return api.post_reports(token, body)


@pytest.fixture
def leveled(api: Api) -> tuple[str, str]:
    return api.create_campaign(LEVELED), api.create_token()


def test_the_campaign_document_shows_its_levels_and_strategy(api: Api) -> None:
    config_id = api.create_campaign(LEVELED)
    served = api.session.get(f"{api.url}/v1/campaigns/leveled").json()
    assert served.pop("config_id") == config_id
    config = CampaignConfig.from_dict(served)
    assert config.config_id == config_id
    assert dict(config.levels) == LEVELS and config.level_strategy == "optimal"


def test_a_batch_at_a_level_is_stored_with_its_level(
    api: Api, leveled: tuple[str, str], redis_client: Any
) -> None:
    config_id, token = leveled
    response = post(api, token, config_id, "medium", [0, 3])
    assert response.status_code == 202, response.text
    [(_, fields)] = redis_client.xrange(keys.stream("leveled", 0))
    assert fields[b"l"] == b"medium"
    oracle = CampaignConfig.from_dict(LEVELED).level_oracle("medium")
    assert oracle is not None
    assert oracle.unpack(fields[b"p"], 2)["y"].tolist() == [0, 3]


def test_reports_are_validated_with_their_levels_oracle(api: Api, leveled: tuple[str, str]) -> None:
    config_id, token = leveled
    # y = 5 is a valid bucket at level low (g = 8) but not at level high (g = 3).
    assert post(api, token, config_id, "low", [5]).status_code == 202
    status, field, reason = error_of(post(api, token, config_id, "high", [5]))
    assert status == 400 and field != "level", reason


def test_a_level_unknown_to_the_config_is_rejected(
    api: Api, leveled: tuple[str, str], redis_client: Any
) -> None:
    config_id, token = leveled
    status, field, _ = error_of(post(api, token, config_id, "extreme", [0]))
    assert (status, field) == (409, "level")
    assert redis_client.xlen(keys.stream("leveled", 0)) == 0


def test_a_config_with_levels_requires_one_and_one_without_levels_refuses_one(
    api: Api, leveled: tuple[str, str], campaign: tuple[str, str]
) -> None:
    config_id, token = leveled
    for missing in (None, ""):
        assert error_of(post(api, token, config_id, missing, [0]))[:2] == (400, "level")
    plain_id, _ = campaign
    plain = {"campaign": "colors", "config_id": plain_id, "reports": [{"y": 1}], "level": "low"}
    assert error_of(api.post_reports(token, plain))[:2] == (400, "level")


def test_under_threshold_the_levels_below_t_do_not_report(api: Api) -> None:
    config_id = api.create_campaign(
        {**LEVELED, "level_strategy": "threshold", "level_threshold": 1.0}
    )
    token = api.create_token()
    assert error_of(post(api, token, config_id, "high", [0]))[:2] == (409, "level")
    # The others report at t = 1 (OLH g = 4): y = 3 fits, y = 5 does not.
    assert post(api, token, config_id, "low", [3]).status_code == 202
    assert post(api, token, config_id, "low", [5]).status_code == 400


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"levels": {"High": 1.0}}, "levels"),
        ({"levels": {"a": 3.0}}, "levels"),  # above the campaign's epsilon
        ({"levels": {"a": -1}}, "levels.a"),
        ({"levels": {"a": 1.0}, "level_strategy": "median"}, "level_strategy"),
        ({"levels": {"a": 1.0}, "level_strategy": "threshold"}, "level_threshold"),
    ],
)
def test_invalid_levels_are_refused_when_the_campaign_is_created(
    api: Api, changes: dict[str, Any], field: str
) -> None:
    response = api.session.post(
        f"{api.url}/v1/campaigns", json={**LEVELED, **changes}, headers=api.admin()
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
