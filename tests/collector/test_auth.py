"""Ingest tokens: found in Redis by their SHA-256, trusted per process for a short time (so a
revocation takes effect within `token_cache_seconds`), unknown tokens never cached."""

from __future__ import annotations

from typing import Any

import pytest

from ldptel.collector import auth as auth_module
from ldptel.collector.auth import IngestAuth, create_token, revoke_token, token_hash
from ldptel.collector.errors import ApiError
from ldptel.store import keys


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def status_of(auth: IngestAuth, token: str) -> int | str:
    try:
        return auth.caller(f"Bearer {token}").app
    except ApiError as error:
        return error.status


def test_a_revocation_takes_effect_once_the_cached_lookup_expires(redis_client: Any) -> None:
    clock = Clock()
    auth = IngestAuth(redis_client, cache_seconds=2.0, clock=clock)
    token = create_token(redis_client, "myapp")
    caller = auth.caller(f"Bearer {token}")
    assert (caller.app, caller.token_hash) == ("myapp", token_hash(token))
    assert revoke_token(redis_client, token)
    clock.now += 1.9
    assert status_of(auth, token) == "myapp"  # still trusted by this process
    clock.now += 0.2
    assert status_of(auth, token) == 403
    assert status_of(auth, token) == 403


def test_without_a_cache_a_revocation_takes_effect_at_once(redis_client: Any) -> None:
    auth = IngestAuth(redis_client, cache_seconds=0)
    token = create_token(redis_client, "myapp")
    assert status_of(auth, token) == "myapp"
    revoke_token(redis_client, token)
    assert status_of(auth, token) == 403


def test_an_unknown_token_is_not_cached(redis_client: Any) -> None:
    auth = IngestAuth(redis_client, cache_seconds=60, clock=Clock())
    token = "ldp_" + "B" * 43
    assert status_of(auth, token) == 403
    digest = token_hash(token)
    redis_client.hset(keys.token(digest), mapping={"app": "late", "sha256": digest})
    assert status_of(auth, token) == "late"


def test_spellings_of_one_header_cannot_grow_the_cache_past_its_cap(
    redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cache is keyed by the header as sent: "Bearer t", "bearer t", "Bearer t  "...
    monkeypatch.setattr(auth_module, "MAX_CACHED_TOKENS", 4)
    auth = IngestAuth(redis_client, cache_seconds=60, clock=Clock())
    token = create_token(redis_client, "myapp")
    for spaces in range(10):
        assert auth.caller(f"Bearer {token}{' ' * spaces}").app == "myapp"
    assert len(auth._known) == 4


def test_a_record_filed_under_the_wrong_key_is_refused(redis_client: Any) -> None:
    auth = IngestAuth(redis_client, cache_seconds=60, clock=Clock())
    token = "ldp_" + "C" * 43
    redis_client.hset(keys.token(token_hash(token)), mapping={"app": "x", "sha256": "0" * 64})
    assert status_of(auth, token) == 403


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing bearer token"),
        ("", "missing bearer token"),
        ("Basic abc", "must be 'Bearer <token>'"),
        ("Bearer ", "must be 'Bearer <token>'"),
        ("Bearer short", "invalid token"),
        ("Bearer bad token!", "invalid token"),
    ],
)
def test_a_missing_or_malformed_header_is_401(
    redis_client: Any, header: str | None, reason: str
) -> None:
    auth = IngestAuth(redis_client)
    with pytest.raises(ApiError) as raised:
        auth.caller(header)
    assert raised.value.status == 401
    assert raised.value.reason == reason
    assert raised.value.headers["WWW-Authenticate"] == "Bearer"
