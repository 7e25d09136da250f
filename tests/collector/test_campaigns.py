"""Campaign registry and tokens over HTTP: POST/GET /v1/campaigns, retire, POST /v1/tokens."""

from __future__ import annotations

import math
from typing import Any

import pytest
from collector_api import Api, campaign_config

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles.histogram import derive_table
from ldptel.collector.auth import token_hash
from ldptel.store import keys

#: RAPPOR's f at epsilon 1 (h = 2, p = 0.5, q = 0.75): a multiple of 2^-31.
RAPPOR_F_AT_1 = 1_147_042_122 / 2**31


def error_of(response: Any) -> tuple[str, str]:
    body = response.json()["error"]
    return body["field"], body["reason"]


def test_created_campaign_is_served_with_its_config_id_as_etag(api: Api) -> None:
    config_id = api.create_campaign()
    response = api.session.get(f"{api.url}/v1/campaigns/colors")
    assert response.status_code == 200
    body = response.json()
    assert body.pop("config_id") == config_id
    assert CampaignConfig.from_dict(body).config_id == config_id
    assert response.headers["ETag"] == f'"{config_id}"'
    assert "max-age" in response.headers["Cache-Control"]


E = math.e
#: The noise tables of SHE (R = 1) and THE (R = 2) at epsilon 1, as served.
SHE_TABLE, THE_TABLE = (derive_table(1.0, R).to_json() for R in (1, 2))


@pytest.mark.parametrize(
    ("oracle", "fixed"),
    [
        ("she", {"resolution": 1, "noise": SHE_TABLE}),
        ("the", {"resolution": 2, "noise": THE_TABLE, "theta": 0.875}),  # t = 1: (1 + 3/4) / 2
        ("rappor", {"k": 16, "h": 2, "m": 64, "p": 0.5, "q": 0.75, "f": RAPPOR_F_AT_1}),
        ("olh", {"g": 4, "p": 1 / (1 + 3 * math.exp(-1.0))}),  # round(e + 1)
        ("ss", {"k": 1, "p": E / (E + 4)}),  # round(5 / (e + 1))
        ("de", {"p": E / (E + 4), "q": 1 / (E + 4)}),
    ],
)
def test_a_campaign_is_stored_with_its_oracles_defaults_written_out(
    api: Api, oracle: str, fixed: dict[str, Any]
) -> None:
    # So that a default changed in a later version cannot change an existing campaign, and so
    # that no client derives a parameter (docs/protocol.md, "Derived parameters").
    config_id = api.create_campaign(campaign_config(oracle=oracle))
    body = api.session.get(f"{api.url}/v1/campaigns/colors").json()
    assert body["params"] == fixed
    # The same campaign given with its defaults spelled out is the same config.
    assert api.create_campaign(campaign_config(oracle=oracle, params=fixed)) == config_id


def test_a_campaign_with_levels_is_served_with_each_levels_derived_parameters(api: Api) -> None:
    levels = {"high": 0.5, "medium": 1.0, "low": 2.0}
    config_id = api.create_campaign(campaign_config(oracle="olh", epsilon=2.0, levels=levels))
    body = api.session.get(f"{api.url}/v1/campaigns/colors").json()
    # round(e^eps + 1) and p at each level's epsilon: the client reads them, never derives.
    g = {"high": 3, "medium": 4, "low": 8}
    assert body["level_params"] == {
        level: {"g": g[level], "p": 1 / (1 + (g[level] - 1) * math.exp(-epsilon))}
        for level, epsilon in levels.items()
    }
    assert body["params"] == {}
    served = CampaignConfig.from_dict({k: v for k, v in body.items() if k != "config_id"})
    assert served.config_id == config_id == body["config_id"]


def test_an_auto_campaign_is_served_with_the_chosen_oracle_and_accepts_its_reports(
    api: Api,
) -> None:
    config_id = api.create_campaign(campaign_config(oracle="auto", epsilon=2.0))
    assert api.create_campaign(campaign_config(oracle="auto", epsilon=2.0)) == config_id
    body = api.session.get(f"{api.url}/v1/campaigns/colors").json()
    assert body["oracle"] == body["oracle_choice"]["oracle"] != "auto"
    assert "lowest variance" in body["oracle_choice"]["reason"]
    config = CampaignConfig.from_dict({k: v for k, v in body.items() if k != "config_id"})
    assert config.config_id == config_id
    reports = [config.build_oracle().perturb(v) for v in (0, 1, 4)]
    answer = api.post_reports(
        api.create_token(), {"campaign": "colors", "config_id": config_id, "reports": reports}
    )
    assert answer.status_code == 202, answer.text


def test_if_none_match_gives_304(api: Api) -> None:
    config_id = api.create_campaign()
    for tag in (f'"{config_id}"', f'W/"{config_id}"', f'"other", "{config_id}"', "*"):
        response = api.session.get(f"{api.url}/v1/campaigns/colors", headers={"If-None-Match": tag})
        assert response.status_code == 304, tag
    stale = api.session.get(f"{api.url}/v1/campaigns/colors", headers={"If-None-Match": '"x"'})
    assert stale.status_code == 200


def test_creating_the_same_config_again_changes_nothing(api: Api) -> None:
    first = api.session.post(f"{api.url}/v1/campaigns", json=campaign_config(), headers=api.admin())
    again = api.session.post(f"{api.url}/v1/campaigns", json=campaign_config(), headers=api.admin())
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["config_id"] == again.json()["config_id"]
    assert again.json()["changed"] is False


def test_a_changed_config_gets_a_new_active_id_and_the_old_stays_readable(
    api: Api, redis_client: Any
) -> None:
    old = api.create_campaign()
    new = api.create_campaign(campaign_config(epsilon=2.0))
    assert new != old
    assert api.session.get(f"{api.url}/v1/campaigns/colors").json()["config_id"] == new
    assert redis_client.get(keys.config(old)) is not None
    assert redis_client.hget(keys.campaign("colors"), "config_id") == new.encode()
    assert redis_client.smembers(keys.campaigns()) == {b"colors"}


def test_retired_campaign_is_gone_and_cannot_be_recreated(api: Api) -> None:
    api.create_campaign()
    retired = api.session.post(f"{api.url}/v1/campaigns/colors/retire", headers=api.admin())
    assert retired.status_code == 200 and retired.json()["retired"] is True
    assert api.session.get(f"{api.url}/v1/campaigns/colors").status_code == 410
    again = api.session.post(
        f"{api.url}/v1/campaigns", json=campaign_config(epsilon=3.0), headers=api.admin()
    )
    assert again.status_code == 409
    assert error_of(again)[0] == "name"


def test_unknown_campaign_is_404(api: Api) -> None:
    assert api.session.get(f"{api.url}/v1/campaigns/nope").status_code == 404
    response = api.session.post(f"{api.url}/v1/campaigns/nope/retire", headers=api.admin())
    assert response.status_code == 404
    assert error_of(response) == ("campaign", "unknown campaign")


def numeric_config(oracle: str, **params: int) -> dict[str, Any]:
    return {"name": "latency", "oracle": oracle, "epsilon": 1, "range": [0, 2000], "params": params}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (campaign_config(epsilon=0), "epsilon"),
        (campaign_config(epsilon="1"), "epsilon"),
        (campaign_config(oracle="nosuch"), "oracle"),
        (campaign_config(name="Bad Name"), "name"),
        (campaign_config(shards=0), "shards"),
        (campaign_config(surprise=1), "surprise"),
        (campaign_config(params={"g": 2}), "params"),
        # served probabilities that would promise less privacy than epsilon: e^eps = 27 * 4
        (campaign_config(params={"p": 0.9, "q": 0.025}), "p"),
        (campaign_config(oracle="she", params={"noise": {"a": 0.5}}), "noise"),
        # numeric integers that guarantee 6.7-9.2 on an epsilon-1 campaign
        (numeric_config("duchi", resolution=8, base=1, step=100), "params.base"),
        (numeric_config("pm", resolution=16, heavy=1000, light=1, band=4), "params.light"),
        (numeric_config("dbitflip", resolution=7, sampled=8, heavy=100, light=1), "params.light"),
        ({"name": "x"}, "oracle"),
        ([1, 2], "config"),
        ({"name": "x", "oracle": "de", "epsilon": 1, "max_length": 8}, "oracle"),
        ({"name": "x", "oracle": "cms", "epsilon": 1, "max_length": 0}, "max_length"),
        ({"name": "x", "oracle": "cms", "epsilon": 1, "max_length": "8"}, "max_length"),
        ({"name": "x", "oracle": "auto", "epsilon": 1, "max_length": 8, "domain": []}, "domain"),
        ({"name": "x", "oracle": "cms", "epsilon": 1}, "domain"),
    ],
)
def test_invalid_config_is_400_naming_the_field(api: Api, config: Any, field: str) -> None:
    response = api.session.post(f"{api.url}/v1/campaigns", json=config, headers=api.admin())
    assert response.status_code == 400
    assert error_of(response)[0] == field


def test_admin_endpoints_need_the_admin_token(api: Api) -> None:
    token = api.create_token()
    calls = [
        ("post", "/v1/campaigns", campaign_config()),
        ("post", "/v1/campaigns/colors/retire", None),
        ("post", "/v1/tokens", {"app": "x"}),
    ]
    for method, path, body in calls:
        missing = api.session.request(method, f"{api.url}{path}", json=body)
        assert missing.status_code == 401, path
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        wrong = api.session.request(
            method, f"{api.url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert wrong.status_code == 403, path
        malformed = api.session.request(
            method, f"{api.url}{path}", json=body, headers={"Authorization": "Basic abc"}
        )
        assert malformed.status_code == 401, path


def test_token_is_returned_once_and_stored_only_as_its_hash(api: Api, redis_client: Any) -> None:
    token = api.create_token("myapp")
    stored = redis_client.hgetall(keys.token(token_hash(token)))
    assert stored[b"app"] == b"myapp"
    dump = b"".join(redis_client.dump(key) or b"" for key in redis_client.keys("*")) + b"".join(
        redis_client.keys("*")
    )
    assert token.encode() not in dump


@pytest.mark.parametrize("body", [{"app": "Bad App"}, {}, {"app": 3}, {"app": "a", "x": 1}])
def test_invalid_token_request_is_400(api: Api, body: Any) -> None:
    response = api.session.post(f"{api.url}/v1/tokens", json=body, headers=api.admin())
    assert response.status_code == 400
