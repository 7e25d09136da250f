"""Ingest tokens (one per app, stored only as SHA-256), the admin token, and the per-token
rate limit (counted by the ingest script). Tokens are compared as digests with
`hmac.compare_digest`."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ldptel.client.campaign import NAME_PATTERN
from ldptel.collector.errors import ApiError
from ldptel.store import keys

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,256}")  # fullmatch: `$` passes "...\n"

#: Cap on cached tokens per process; past it, expired entries are dropped (only tokens found
#: in Redis are cached, so the cache cannot be flooded with made-up ones).
MAX_CACHED_TOKENS = 10_000


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a token: the only form in which Redis ever sees it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(redis: Any, app: str) -> str:
    """Create an ingest token for `app`; returns the token (shown once, stored hashed)."""
    if not NAME_PATTERN.fullmatch(app):
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
    if scheme.lower() != "bearer" or not token.strip():
        reason = "must be 'Bearer <token>'"
    elif not TOKEN_PATTERN.fullmatch(token.strip()):
        reason = "invalid token"  # not one we could have issued; no need to ask Redis
    else:
        return token.strip()
    raise ApiError(
        401, "Authorization", reason, code="unauthorized", headers={"WWW-Authenticate": "Bearer"}
    )


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
    """At most `limit` requests per `seconds` per token and campaign (limit 0 = unlimited).

    Counted per campaign shard, `ceil(limit / shards)` each, inside the ingest script (one
    round trip, Redis Cluster-safe). A batch's shard is a hash of its random idempotency key,
    so a token's requests spread evenly over the shards.
    """

    limit: int
    seconds: int

    def window(self, now: float) -> int:
        return int(now) // self.seconds

    def per_shard(self, shards: int) -> int:
        return -(-self.limit // shards)

    def exceeded(self, now: float) -> ApiError:
        """The 429 answer, with Retry-After = seconds until the next window."""
        retry_after = max(1, (self.window(now) + 1) * self.seconds - int(now))
        return ApiError(
            429,
            "Authorization",
            f"rate limit of {self.limit} requests per {self.seconds} s exceeded",
            code="rate_limited",
            headers={"Retry-After": str(retry_after)},
        )


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the app of its ingest token, and the token's SHA-256 (hex)."""

    app: str
    token_hash: str


class IngestAuth:
    """Checks ingest tokens against Redis (one HMGET).

    A token found in Redis is trusted for `cache_seconds` by this process without asking
    again, so a revocation takes effect on every worker within that time. Unknown tokens are
    never cached.
    """

    def __init__(
        self,
        redis: Any,
        *,
        cache_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._known: dict[str, tuple[float, str]] = {}

    def caller(self, authorization: str | None) -> Caller:
        """The caller whose token the Authorization header carries; raises 401/403."""
        digest = token_hash(bearer_token(authorization))
        now = self.clock()
        cached = self._known.get(digest)
        if cached is not None and cached[0] > now:
            return Caller(cached[1], digest)
        app, stored = self.redis.hmget(keys.token(digest), "app", "sha256")
        # The lookup is by digest already; comparing the stored digest in constant time
        # guards against a record filed under the wrong key.
        if app is None or stored is None or not hmac.compare_digest(stored, digest.encode()):
            self._known.pop(digest, None)
            raise ApiError(403, "Authorization", "unknown ingest token", code="forbidden")
        name = str(app.decode())
        if self.cache_seconds > 0:
            if len(self._known) >= MAX_CACHED_TOKENS:
                self._known = {k: v for k, v in self._known.items() if v[0] > now}
            self._known[digest] = (now + self.cache_seconds, name)
        return Caller(name, digest)
