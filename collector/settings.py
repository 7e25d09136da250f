"""The collector's settings: one frozen object, built from keyword arguments or a mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ldptel.client.errors import ParameterError

DAY = 86_400


@dataclass(frozen=True)
class CollectorConfig:
    """Settings of one collector process (every worker builds its app from the same one)."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    #: Token for campaign and token management; None disables the admin endpoints (403).
    admin_token: str | None = None
    #: Token that may read the aggregator's window reports (the admin token may too).
    analyst_token: str | None = None
    #: Cap on the request body, compressed and decompressed alike (413 above it).
    max_body_bytes: int = 4 * 1024 * 1024
    max_reports_per_batch: int = 5_000
    #: Under `ldptel collector serve`: a request body not received in full this many seconds
    #: after its headers is answered 408 and its connection closed (slow clients).
    body_timeout_seconds: float = 10.0
    #: Per ingest token and campaign: at most `rate_limit` requests per `rate_limit_seconds`
    #: (0 = no limit), counted per campaign shard (`ceil(rate_limit / shards)` each).
    rate_limit: int = 1_000
    rate_limit_seconds: int = 1
    #: How long a worker trusts an ingest token it found in Redis (a revocation takes effect
    #: within this time; 0 = ask Redis on every request).
    token_cache_seconds: float = 2.0
    #: An idempotency mark lives until its window ends plus this long (>= a day, so a client
    #: retrying from its spool the next day is still recognized).
    idempotency_seconds: int = DAY
    #: How long a worker trusts its cached view of a campaign (active config, retired flag).
    registry_cache_seconds: float = 1.0
    #: Cache-Control max-age of GET /v1/campaigns/<name>.
    config_max_age: int = 60
    #: Retry-After (seconds) sent with 503 when Redis is unreachable.
    retry_after_seconds: int = 1
    redis_socket_timeout: float = 5.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CollectorConfig:
        """Settings from a mapping (e.g. parsed TOML/JSON); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParameterError(unknown[0], "unknown collector setting")
        return replace(cls(), **dict(data)).checked()

    def checked(self) -> CollectorConfig:
        """Self, after range checks that name the setting at fault."""
        for name in ("max_body_bytes", "max_reports_per_batch", "rate_limit_seconds"):
            if getattr(self, name) < 1:
                raise ParameterError(name, "must be >= 1")
        if not self.body_timeout_seconds > 0:
            raise ParameterError("body_timeout_seconds", "must be > 0")
        if self.token_cache_seconds < 0:
            raise ParameterError("token_cache_seconds", "must be >= 0 (0 disables the cache)")
        if self.rate_limit < 0:
            raise ParameterError("rate_limit", "must be >= 0 (0 disables it)")
        if self.idempotency_seconds < DAY:
            raise ParameterError("idempotency_seconds", f"must be >= {DAY} (a day)")
        return self


def as_config(config: CollectorConfig | Mapping[str, Any] | None) -> CollectorConfig:
    """Accept what `create_app` accepts: a CollectorConfig, a mapping, or None (defaults)."""
    if config is None:
        return CollectorConfig()
    if isinstance(config, CollectorConfig):
        return config.checked()
    return CollectorConfig.from_mapping(config)
