"""POST /v1/reports: what is stored, idempotent retries, and every kind of bad input."""

from __future__ import annotations

import gzip
import http.client
import json
import time
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pytest
import requests
from collector_api import Api, batch, campaign_config, serve

from ldptel.client.campaign import CampaignConfig
from ldptel.collector.ingest import shard_of
from ldptel.store import keys

Campaign = tuple[str, str]


def error_of(response: requests.Response) -> tuple[str, str]:
    body = response.json()["error"]
    return body["field"], body["reason"]


def entries(redis_client: Any, name: str = "colors", shards: int = 1) -> list[Any]:
    found = []
    for shard in range(shards):
        found += redis_client.xrange(keys.stream(name, shard))
    return found


def test_a_valid_batch_is_stored_as_one_entry_and_acknowledged(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    before = time.time()
    response = api.post_reports(token, batch(config_id, [0, 4, 2]))
    assert response.status_code == 202
    assert response.json() == {"accepted": 3, "duplicate": False}
    [(entry_id, fields)] = entries(redis_client)
    assert set(fields) == {b"c", b"w", b"n", b"p", b"l"}
    config = CampaignConfig.from_dict(campaign_config())
    window = config.window_of(before)
    assert fields[b"c"] == config_id.encode()
    assert int(fields[b"w"]) == window
    assert fields[b"n"] == b"3"
    assert fields[b"l"] == b""
    oracle = config.build_oracle()
    assert oracle.unpack(fields[b"p"], 3)["y"].tolist() == [0, 4, 2]
    # The entry id tells the window, not the arrival time.
    assert entry_id == f"{window * 1000}-0".encode()


def test_stream_ids_stay_increasing_within_a_window(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    for _ in range(3):
        assert api.post_reports(token, batch(config_id, [1])).status_code == 202
    ids = [entry_id for entry_id, _ in entries(redis_client)]
    window_ms = ids[0].split(b"-")[0]
    assert ids == [window_ms + b"-0", window_ms + b"-1", window_ms + b"-2"]


def test_a_retried_batch_is_stored_once_and_answered_with_the_original_count(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    first = api.post_reports(token, batch(config_id, [1, 2]), key="batch-1")
    retry = api.post_reports(token, batch(config_id, [1, 2]), key="batch-1")
    other = api.post_reports(token, batch(config_id, [3]), key="batch-2")
    assert first.json() == {"accepted": 2, "duplicate": False}
    assert retry.status_code == 202
    assert retry.json() == {"accepted": 2, "duplicate": True}
    assert other.json() == {"accepted": 1, "duplicate": False}
    assert len(entries(redis_client)) == 2
    mark = keys.idempotency("colors", 0, "batch-1")
    assert redis_client.ttl(mark) >= 86_400


def test_a_key_reused_for_a_different_batch_is_422_and_stores_nothing(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    three = batch(config_id, [1, 2, 3])
    assert api.post_reports(token, three, key="k").json() == {"accepted": 3, "duplicate": False}
    seven = api.post_reports(token, batch(config_id, [1, 2, 3, 4, 0, 1, 2]), key="k")
    assert seven.status_code == 422
    assert error_of(seven)[0] == "Idempotency-Key"
    # The same batch, gzipped and formatted differently, is still its retry: the digest is
    # of the validated reports, not of the bytes.
    again = raw_post(api, token, gzip.compress(json.dumps(three, indent=2).encode()),
                     **{"Content-Encoding": "gzip", "Idempotency-Key": "k"})  # fmt: skip
    assert again.json() == {"accepted": 3, "duplicate": True}
    assert len(entries(redis_client)) == 1


def test_a_text_longer_than_the_campaigns_largest_batch_is_413_unparsed(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    # DE's widest report is {"y":4294967295}: 5000 of them, padded, plus the envelope.
    config_id, token = campaign
    padding = b" " * 400_000
    body = b'{"campaign": "colors", "config_id": "%s", "reports": [%s{"y": 1}]}' % (
        config_id.encode(), padding)  # fmt: skip
    response = raw_post(api, token, body)
    assert response.status_code == 413
    assert error_of(response) == ("body", "larger than 326024 bytes")
    assert entries(redis_client) == []


def test_batches_spread_over_shards_by_their_idempotency_key(api: Api, redis_client: Any) -> None:
    config_id = api.create_campaign(campaign_config(shards=4))
    token = api.create_token()
    batch_keys = [f"key-{i}" for i in range(20)]
    for key in batch_keys:
        assert api.post_reports(token, batch(config_id, [0]), key=key).status_code == 202
    for shard in range(4):
        expected = sum(shard_of(key, 4) == shard for key in batch_keys)
        assert redis_client.xlen(keys.stream("colors", shard)) == expected
    assert len({shard_of(key, 4) for key in batch_keys}) > 1


def test_gzip_bodies_are_accepted(api: Api, campaign: Campaign) -> None:
    config_id, token = campaign
    body = gzip.compress(json.dumps(batch(config_id, [1, 2, 3])).encode())
    response = api.session.post(
        f"{api.url}/v1/reports",
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Idempotency-Key": "gz",
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        },
    )
    assert response.status_code == 202 and response.json()["accepted"] == 3


# -- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reports", "field"),
    [
        ([{"y": 5}], "reports[0].y"),
        ([{"y": 1}, {"y": -1}], "reports[1].y"),
        ([{"y": 1.5}], "reports[0].y"),
        ([{"y": True}], "reports[0].y"),
        ([{"z": 1}], "reports[0].z"),  # unknown inside a report, like unknown batch fields
        ([{"y": 1}, {"y": 1, "extra": 0}], "reports[1].extra"),
        ([3], "reports[0].report"),
        ([], "reports"),
    ],
)
def test_a_report_of_the_wrong_shape_rejects_the_whole_batch(
    api: Api, campaign: Campaign, redis_client: Any, reports: list[Any], field: str
) -> None:
    config_id, token = campaign
    body = {"campaign": "colors", "config_id": config_id, "reports": reports}
    response = api.post_reports(token, body)
    assert response.status_code == 400
    assert error_of(response)[0] == field
    assert entries(redis_client) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"campaign": "colors", "reports": [{"y": 1}]}, "config_id"),
        ({"config_id": "0" * 16, "reports": [{"y": 1}]}, "campaign"),
        ({"campaign": "colors", "config_id": "XYZ", "reports": [{"y": 1}]}, "config_id"),
        ({"campaign": "colors", "config_id": "0" * 16, "reports": {"y": 1}}, "reports"),
        ({"campaign": "colors", "config_id": "0" * 16, "reports": [], "ip": "1.2.3.4"}, "ip"),
        ([1, 2, 3], "body"),
    ],
)
def test_a_bad_envelope_is_400(api: Api, campaign: Campaign, body: Any, field: str) -> None:
    response = api.post_reports(campaign[1], body)
    assert response.status_code == 400
    assert error_of(response)[0] == field


def raw_post(api: Api, token: str, data: bytes, **headers: str) -> requests.Response:
    sent = {
        "Authorization": f"Bearer {token}",
        "Idempotency-Key": "raw",
        "Content-Type": "application/json",
        **headers,
    }
    return api.session.post(f"{api.url}/v1/reports", data=data, headers=sent)


@pytest.mark.parametrize(
    "data",
    [b"{", b'{"campaign": NaN}', b'{"reports": [{"y": Infinity}]}', b"\xff\xfe\x00", b""],
)
def test_malformed_json_is_400(api: Api, campaign: Campaign, data: bytes) -> None:
    response = raw_post(api, campaign[1], data)
    assert response.status_code == 400
    assert error_of(response)[0] == "body"


def test_nan_inside_a_report_is_400(api: Api, campaign: Campaign) -> None:
    config_id, token = campaign
    data = f'{{"campaign":"colors","config_id":"{config_id}","reports":[{{"y":NaN}}]}}'
    assert raw_post(api, token, data.encode()).status_code == 400


def test_wrong_content_type_or_encoding_is_415(api: Api, campaign: Campaign) -> None:
    token = campaign[1]
    assert raw_post(api, token, b"{}", **{"Content-Type": "text/plain"}).status_code == 415
    response = raw_post(api, token, b"{}", **{"Content-Encoding": "br"})
    assert response.status_code == 415
    assert error_of(response)[0] == "Content-Encoding"


def test_bad_gzip_is_400(api: Api, campaign: Campaign) -> None:
    token = campaign[1]
    assert raw_post(api, token, b"not gzip", **{"Content-Encoding": "gzip"}).status_code == 400
    truncated = gzip.compress(b'{"a": 1}')[:-6]
    assert raw_post(api, token, truncated, **{"Content-Encoding": "gzip"}).status_code == 400


def small_api(redis_url: str, **settings: Any) -> tuple[Api, Any]:
    server = serve({"redis_url": redis_url, **settings})
    return Api(server.url), server


def test_too_many_reports_is_413(redis_url: str, redis_client: Any) -> None:
    api, server = small_api(redis_url, max_reports_per_batch=10)
    try:
        config_id, token = api.create_campaign(), api.create_token()
        assert api.post_reports(token, batch(config_id, [0] * 10)).status_code == 202
        response = api.post_reports(token, batch(config_id, [0] * 11))
        assert response.status_code == 413
        assert error_of(response)[0] == "reports"
    finally:
        server.stop()


def test_oversize_bodies_are_413_by_header_by_stream_and_after_gunzip(
    redis_url: str, redis_client: Any
) -> None:
    api, server = small_api(redis_url, max_body_bytes=1000)
    try:
        config_id, token = api.create_campaign(), api.create_token()
        # Declared too large: answered from the headers, the body is never read.
        url = urlparse(api.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.putrequest("POST", "/v1/reports")
        for name, value in {
            "Authorization": f"Bearer {token}",
            "Idempotency-Key": "big",
            "Content-Type": "application/json",
            "Content-Length": "1000000",
        }.items():
            conn.putheader(name, value)
        conn.endheaders()
        declared = conn.getresponse()
        assert declared.status == 413
        assert json.loads(declared.read())["error"]["field"] == "body"
        conn.close()
        # Chunked (no Content-Length): cut off by the capped read.
        chunks = iter([b'{"campaign": "colors", "reports": [', b"0, " * 600, b"0]}"])
        chunked = raw_post(api, token, chunks)  # type: ignore[arg-type]
        assert chunked.status_code == 413
        # A gzip bomb: small on the wire, over the cap once inflated.
        bomb = gzip.compress(json.dumps(batch(config_id, [0] * 500)).encode())
        assert len(bomb) < 1000
        assert raw_post(api, token, bomb, **{"Content-Encoding": "gzip"}).status_code == 413
    finally:
        server.stop()


def test_unknown_campaign_is_404_and_unknown_config_409(api: Api, campaign: Campaign) -> None:
    config_id, token = campaign
    unknown = api.post_reports(token, batch(config_id, [1], name="nope"))
    assert unknown.status_code == 404
    assert error_of(unknown) == ("campaign", "unknown campaign")
    wrong_id = api.post_reports(token, batch("0123456789abcdef", [1]))
    assert wrong_id.status_code == 409
    assert error_of(wrong_id) == ("config_id", "unknown config")


def test_reports_for_a_replaced_config_are_409_retired_config(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    old, token = campaign
    new = api.create_campaign(campaign_config(epsilon=2.0))
    response = api.post_reports(token, batch(old, [1]))
    assert response.status_code == 409
    assert error_of(response) == ("config_id", "retired config")
    assert api.post_reports(token, batch(new, [1])).status_code == 202


def test_a_retired_campaign_rejects_all_reports(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    api.session.post(f"{api.url}/v1/campaigns/colors/retire", headers=api.admin())
    response = api.post_reports(token, batch(config_id, [1]))
    assert response.status_code == 409
    assert error_of(response) == ("campaign", "retired campaign")
    assert entries(redis_client) == []


@pytest.mark.parametrize("key", [None, "", "x" * 129, "has space", "ünï"])
def test_a_missing_or_bad_idempotency_key_is_400(
    api: Api, campaign: Campaign, key: str | None
) -> None:
    config_id, token = campaign
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    data = json.dumps(batch(config_id, [1])).encode()
    response = api.session.post(f"{api.url}/v1/reports", data=data, headers=headers)
    assert response.status_code == 400
    assert error_of(response)[0] == "Idempotency-Key"


def test_missing_token_is_401_and_unknown_token_403(api: Api, campaign: Campaign) -> None:
    config_id, _ = campaign
    body = json.dumps(batch(config_id, [1])).encode()
    headers = {"Idempotency-Key": "k", "Content-Type": "application/json"}
    missing = api.session.post(f"{api.url}/v1/reports", data=body, headers=headers)
    assert missing.status_code == 401
    unknown = api.post_reports("ldp_" + "A" * 43, batch(config_id, [1]))
    assert unknown.status_code == 403
    admin = api.post_reports("test-admin-token-0123456789", batch(config_id, [1]))
    assert admin.status_code == 403


def test_a_revoked_token_is_403(api: Api, campaign: Campaign, redis_client: Any) -> None:
    from ldptel.collector.auth import revoke_token

    config_id, token = campaign
    assert revoke_token(redis_client, token)
    assert api.post_reports(token, batch(config_id, [1])).status_code == 403


def test_rate_limit_is_429_with_retry_after(redis_url: str, redis_client: Any) -> None:
    api, server = small_api(redis_url, rate_limit=3, rate_limit_seconds=3600)
    try:
        config_id, token = api.create_campaign(), api.create_token()
        statuses = [api.post_reports(token, batch(config_id, [1])).status_code for _ in range(5)]
        assert statuses == [202, 202, 202, 429, 429]
        limited = api.post_reports(token, batch(config_id, [1]))
        assert 1 <= int(limited.headers["Retry-After"]) <= 3600
        other = api.create_token("otherapp")
        assert api.post_reports(other, batch(config_id, [1])).status_code == 202
    finally:
        server.stop()


def test_refused_requests_count_against_their_tokens_rate_limit(
    redis_url: str, redis_client: Any
) -> None:
    api, server = small_api(redis_url, rate_limit=3, rate_limit_seconds=3600)
    try:
        config_id, token = api.create_campaign(), api.create_token()
        bad = [
            {**batch(config_id, [1]), "reports": [{"y": 99}]},  # a report out of the domain
            {**batch(config_id, [1]), "campaign": "nope"},  # an unknown campaign
            {**batch(config_id, [1]), "extra": 1},  # an unknown field
        ]
        assert [api.post_reports(token, body).status_code for body in bad] == [400, 404, 400]
        # The token spent its refusals: even a valid batch is 429 until the window ends.
        limited = api.post_reports(token, batch(config_id, [1]))
        assert limited.status_code == 429 and error_of(limited)[0] == "Authorization"
        assert "refused requests" in limited.json()["error"]["reason"]
        assert 1 <= int(limited.headers["Retry-After"]) <= 3600
        # Another token's clients are served as before.
        other = api.create_token("otherapp")
        assert api.post_reports(other, batch(config_id, [1])).status_code == 202
        assert redis_client.xlen(keys.stream("colors", 0)) == 1
    finally:
        server.stop()


def test_a_privacy_level_is_rejected_until_configs_have_levels(
    api: Api, campaign: Campaign
) -> None:
    config_id, token = campaign
    response = api.post_reports(token, {**batch(config_id, [1]), "level": "high"})
    assert response.status_code == 400
    assert error_of(response)[0] == "level"
    empty = api.post_reports(token, {**batch(config_id, [1]), "level": ""})
    assert empty.status_code == 202


def test_unknown_route_and_method_are_json_errors(api: Api) -> None:
    missing = api.session.get(f"{api.url}/v2/nothing")
    assert missing.status_code == 404 and error_of(missing)[0] == "path"
    wrong = api.session.get(f"{api.url}/v1/reports")
    assert wrong.status_code == 405 and error_of(wrong)[0] == "method"


def test_packed_payload_round_trips_many_reports(
    api: Api, campaign: Campaign, redis_client: Any
) -> None:
    config_id, token = campaign
    values = np.random.default_rng(1).integers(0, 5, 1000).tolist()
    assert api.post_reports(token, batch(config_id, values)).json()["accepted"] == 1000
    [(_, fields)] = entries(redis_client)
    oracle = CampaignConfig.from_dict(campaign_config()).build_oracle()
    assert oracle.unpack(fields[b"p"], 1000)["y"].tolist() == values


def test_an_open_domain_campaign_takes_sketch_reports_and_names_a_bad_field(
    api: Api, redis_client: Any
) -> None:
    config = {"name": "answers", "oracle": "hcms", "epsilon": 2, "max_length": 32}
    config_id, token = api.create_campaign(config), api.create_token()
    served = api.session.get(f"{api.url}/v1/campaigns/answers").json()
    assert served["max_length"] == 32 and "domain" not in served
    good = {"campaign": "answers", "config_id": config_id, "reports": [{"j": 3, "l": 7, "bit": 1}]}
    assert api.post_reports(token, good).status_code == 202
    for report, field in (({"j": 3, "l": 1024, "bit": 1}, "reports[0].l"),
                          ({"j": 3, "l": 7, "bit": 2}, "reports[0].bit"),
                          ({"j": 3, "l": 7}, "reports[0].bit")):  # fmt: skip
        response = api.post_reports(token, {**good, "reports": [report]})
        assert response.status_code == 400 and error_of(response)[0] == field
    assert len(entries(redis_client, "answers")) == 1


def test_an_unknown_field_inside_a_report_is_named_with_its_report(
    api: Api, campaign: Campaign
) -> None:
    config_id, token = campaign
    body = batch(config_id, [1, 2, 3])
    body["reports"][1] = {**body["reports"][1], "zeta": 1, "alpha": 2}
    body["reports"][2] = {**body["reports"][2], "beta": 3}
    response = api.post_reports(token, body)
    assert response.status_code == 400
    assert error_of(response)[0] == "reports[1].alpha"
    lists = batch(config_id, [1])
    lists["reports"] = [[["y"]]]  # not an object (holds an unhashable value): decode names it
    assert error_of(api.post_reports(token, lists))[0] == "reports[0].report"
