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

from ldptel.client.campaign import NAME_PATTERN
from ldptel.collector.errors import ApiError
from ldptel.store import keys
from ldptel.store.connection import RedisClient, text

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,256}")  # fullmatch: `$` passes "...\n"

#: Cap on cached tokens per process; past it, expired entries are dropped (only tokens found
#: in Redis are cached, so the cache cannot be flooded with made-up ones).
MAX_CACHED_TOKENS = 10_000


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a token: the only form in which Redis ever sees it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(redis: RedisClient, app: str) -> str:
    """Create an ingest token for `app`; returns the token (shown once, stored hashed)."""
    if not NAME_PATTERN.fullmatch(app):
        raise ApiError(400, "app", "must match [a-z0-9][a-z0-9_-]{0,63}", code="invalid")
    token = "ldp_" + secrets.token_urlsafe(32)
    digest = token_hash(token)
    redis.hset(keys.token(digest), mapping={"app": app, "sha256": digest})
    return token


def revoke_token(redis: RedisClient, token: str) -> bool:
    """Delete an ingest token; False if it did not exist."""
    return revoke_digest(redis, token_hash(token))


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

    def exceeded(self, now: float, what: str = "requests") -> ApiError:
        """The 429 answer, with Retry-After = seconds until the next window."""
        retry_after = max(1, (self.window(now) + 1) * self.seconds - int(now))
        return ApiError(
            429,
            "Authorization",
            f"rate limit of {self.limit} {what} per {self.seconds} s exceeded",
            code="rate_limited",
            headers={"Retry-After": str(retry_after)},
        )


# KEYS[1] the counter, ARGV[1] its expiry (s); returns the count.
_COUNT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


class RefusalLimit:
    """The rate limit of an ingest token's refused requests: those answered 4xx before the
    ingest script counts them (a gzip bomb or oversized body, bad JSON, a bad batch or report,
    an unknown campaign). Without it a token could send such requests without limit, each
    costing a worker a gunzip, a parse or a validation, and starve other tokens' clients.

    At most `limit` refused requests per token per window; past that, every request of the
    token is answered 429 before its body is gunzipped or parsed, until the window ends. Each
    refusal is one INCR in Redis (the count across workers); a worker remembers a token that
    passed the limit itself, so the check costs no Redis call and a valid request none at all.
    Requests already past the check when the count reaches the limit are still processed, and
    a worker learns of the exhaustion at its own next refusal: per window, at most `limit` plus
    about one refusal per connection the token has open at that moment.

    The token is public (it ships in every app), so the limit alone lets a flood of refusals
    make the token's real clients share its 429s. Each refusal is therefore answered
    `delay_seconds` late (a gevent sleep: it holds a greenlet and a socket, no CPU): a sender
    that waits for its answers refuses at most one request per connection per delay, which
    stays under the limit, and its bombs cost the workers that much less CPU. A valid request
    is never delayed (benchmarks/shared_token_flood.py).
    """

    def __init__(
        self,
        redis: RedisClient,
        limit: RateLimit,
        *,
        delay_seconds: float = 0.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limit = limit
        self.delay_seconds = delay_seconds
        self.clock = clock
        self.sleep = sleep
        self._count = redis.register_script(_COUNT)
        #: token hash -> the window in which it passed the limit
        self._exhausted: dict[str, int] = {}

    def check(self, token_hash: str) -> None:
        """429 if the token passed its refusal limit in the current window."""
        now = self.clock()
        if self._exhausted.get(token_hash) == self.limit.window(now):
            raise self.limit.exceeded(now, "refused requests")

    def count(self, token_hash: str) -> None:
        """Count one refused request of the token (nothing when the rate limit is off), then
        wait out the refusal delay."""
        try:
            self._count_refusal(token_hash)
        finally:
            if self.delay_seconds > 0:
                self.sleep(self.delay_seconds)  # gevent's, under gunicorn: no thread held

    def _count_refusal(self, token_hash: str) -> None:
        if not self.limit.limit:
            return
        window = self.limit.window(self.clock())
        key = keys.refused(token_hash, window)
        if int(self._count(keys=[key], args=[self.limit.seconds + 1])) >= self.limit.limit:
            if len(self._exhausted) >= MAX_CACHED_TOKENS:
                self._exhausted = {t: w for t, w in self._exhausted.items() if w == window}
            self._exhausted[token_hash] = window


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the app of its ingest token, and the token's SHA-256 (hex)."""

    app: str
    token_hash: str


class IngestAuth:
    """Checks ingest tokens against Redis (one HMGET).

    A token found in Redis is trusted for `cache_seconds` by this process without asking
    again, so a revocation takes effect on every worker within that time. Unknown tokens are
    never cached. The cache is keyed by the Authorization header itself, so a cached
    caller costs neither the header's parsing nor the token's SHA-256; it lives in this
    process's memory only, like the request that carried it.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        cache_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.cache_seconds = cache_seconds
        self.clock = clock
        #: Authorization header -> (expiry, caller)
        self._known: dict[str, tuple[float, Caller]] = {}

    def caller(self, authorization: str | None) -> Caller:
        """The caller whose token the Authorization header carries; raises 401/403."""
        now = self.clock()
        cached = self._known.get(authorization) if authorization is not None else None
        if cached is not None and cached[0] > now:
            return cached[1]
        digest = token_hash(bearer_token(authorization))
        app, stored = self.redis.hmget(keys.token(digest), "app", "sha256")
        # The lookup is by digest already; comparing the stored digest in constant time
        # guards against a record filed under the wrong key.
        if app is None or stored is None or not hmac.compare_digest(text(stored), digest):
            if authorization is not None:
                self._known.pop(authorization, None)
            raise ApiError(403, "Authorization", "unknown ingest token", code="forbidden")
        found = Caller(text(app), digest)
        if self.cache_seconds > 0 and authorization is not None:
            if len(self._known) >= MAX_CACHED_TOKENS:
                self._known = {k: v for k, v in self._known.items() if v[0] > now}
            if len(self._known) < MAX_CACHED_TOKENS:  # one token's header variants: bounded
                self._known[authorization] = (now + self.cache_seconds, found)
        return found


@dataclass(frozen=True)
class TokenRecord:
    """An ingest token as Redis knows it: its app and SHA-256; `id` is the digest's first
    12 hex digits, enough to name it in `token list` and `token revoke --id`."""

    app: str
    sha256: str

    @property
    def id(self) -> str:
        return self.sha256[:12]


def list_tokens(redis: RedisClient) -> list[TokenRecord]:
    """Every ingest token's record, by app then id (SCAN: an admin command, not a hot path;
    a cluster client scans every master)."""
    records = []
    for key in redis.scan_iter(match=keys.token("*"), count=1000):
        app, digest = redis.hmget(key, "app", "sha256")
        if app is not None and digest is not None:
            records.append(TokenRecord(text(app), text(digest)))
    return sorted(records, key=lambda record: (record.app, record.sha256))


def revoke_digest(redis: RedisClient, digest: str) -> bool:
    """Delete the ingest token with this SHA-256; False if it did not exist."""
    return bool(redis.delete(keys.token(digest)))
