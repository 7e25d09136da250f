"""Ingest tokens (one per app, stored only as SHA-256), the admin token, and the per-token
rate limit. Tokens are compared as digests with `hmac.compare_digest`."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ldptel.client.campaign import NAME_PATTERN
from ldptel.collector import keys
from ldptel.collector.errors import ApiError

TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,256}$")

# Authenticate and count in one round trip; both keys share the {token:<hash>} hash tag.
# Fixed windows: INCR, and EXPIRE on the first request of a window.
_AUTHORIZE = """
local record = redis.call('HMGET', KEYS[1], 'app', 'sha256')
if not record[1] then return {'', '', 0} end
if tonumber(ARGV[1]) == 0 then return {record[1], record[2], 0} end
local count = redis.call('INCR', KEYS[2])
if count == 1 then redis.call('EXPIRE', KEYS[2], ARGV[2]) end
return {record[1], record[2], count}
"""


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a token: the only form in which Redis ever sees it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(redis: Any, app: str) -> str:
    """Create an ingest token for `app`; returns the token (shown once, stored hashed)."""
    if not NAME_PATTERN.match(app):
        raise ApiError(400, "app", "must match [a-z0-9][a-z0-9_-]{0,63}", code="invalid")
    token = "ldp_" + secrets.token_urlsafe(32)
    digest = token_hash(token)
    redis.hset(keys.token(digest), mapping={"app": app, "sha256": digest})
    return token


def revoke_token(redis: Any, token: str) -> bool:
    """Delete an ingest token; False if it did not exist."""
    return bool(redis.delete(keys.token(token_hash(token))))


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; 401 if missing or malformed."""
    value = authorization or ""
    scheme, _, token = value.partition(" ")
    if not value:
        raise ApiError(
            401,
            "Authorization",
            "missing bearer token",
            code="unauthorized",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if scheme.lower() != "bearer" or not TOKEN_PATTERN.match(token.strip()):
        raise ApiError(
            401,
            "Authorization",
            "must be 'Bearer <token>'",
            code="unauthorized",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


def check_admin(authorization: str | None, admin_token: str | None) -> None:
    """Raise 401/403 unless the Authorization header carries the admin token."""
    token = bearer_token(authorization)
    if admin_token is None:
        raise ApiError(403, "Authorization", "admin endpoints are disabled", code="forbidden")
    given = hashlib.sha256(token.encode()).digest()
    expected = hashlib.sha256(admin_token.encode()).digest()
    if not hmac.compare_digest(given, expected):
        raise ApiError(403, "Authorization", "not the admin token", code="forbidden")


@dataclass(frozen=True)
class RateLimit:
    """At most `limit` requests per `seconds` per token (limit 0 = unlimited)."""

    limit: int
    seconds: int


class IngestAuth:
    """Checks an ingest token and counts it against the rate limit, in one round trip."""

    def __init__(self, redis: Any, rate_limit: RateLimit) -> None:
        self.rate_limit = rate_limit
        self._authorize = redis.register_script(_AUTHORIZE)

    def app_of(self, authorization: str | None) -> str:
        """The app whose token the Authorization header carries; raises 401/403/429."""
        token = bearer_token(authorization)
        digest = token_hash(token)
        now = time.time()
        window = int(now) // self.rate_limit.seconds
        app, stored, count = self._authorize(
            keys=[keys.token(digest), keys.rate(digest, window)],
            args=[self.rate_limit.limit, self.rate_limit.seconds + 1],
        )
        # The lookup is by digest already; comparing the stored digest in constant time
        # guards against a record filed under the wrong key.
        if not app or not hmac.compare_digest(stored, digest.encode()):
            raise ApiError(403, "Authorization", "unknown ingest token", code="forbidden")
        if self.rate_limit.limit and count > self.rate_limit.limit:
            retry_after = max(1, (window + 1) * self.rate_limit.seconds - int(now))
            raise ApiError(
                429,
                "Authorization",
                f"rate limit of {self.rate_limit.limit} requests per "
                f"{self.rate_limit.seconds} s exceeded",
                code="rate_limited",
                headers={"Retry-After": str(retry_after)},
            )
        return str(app.decode())
