"""The collector's settings: one frozen object, built from keyword arguments, a mapping or
the environment (`LDPTEL_<FIELD>`, derived from the fields, so a new field gets its variable)."""

from __future__ import annotations

import math
import string
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from ldptel.client.errors import ParameterError

DAY = 86_400
ENV_PREFIX = "LDPTEL_"
#: Settings that are secrets: also read from the file named by `LDPTEL_<FIELD>_FILE` (Docker
#: and Kubernetes secrets are files), so they never appear on a command line (`ps`).
SECRETS = frozenset({"admin_token", "analyst_token"})
#: A secret must be worth at least this many bits against guessing: a 22-character
#: `secrets.token_urlsafe(16)`, a 32-digit `secrets.token_hex(16)`.
MIN_SECRET_BITS = 128
#: Fewer distinct characters than this is a pattern, not a random draw (a random 22-char
#: url-safe token has fewer with probability below 1e-12).
MIN_SECRET_DISTINCT = 8

Settings = TypeVar("Settings")


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def _parse(name: str, kind: Any, text: str) -> Any:
    """One environment value as the field's type (int, float, bool, str, Path, or X | None)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if args:  # X | None: an empty value means None
        return None if text == "" else _parse(name, args[0], text)
    try:
        if kind is bool:
            if text.lower() not in {"1", "0", "true", "false", "yes", "no"}:
                raise ValueError(text)
            return text.lower() in {"1", "true", "yes"}
        return kind(text)
    except ValueError:
        type_name = getattr(kind, "__name__", str(kind))
        raise ParameterError(env_name(name), f"must be {type_name}, got {text!r}") from None


def secret_bits(secret: str) -> float:
    """What `secret` would be worth if drawn uniformly from its alphabet: length times log2
    of the alphabet (digits 10, hex 16, letters of one case 26, anything mixed 64 as url-safe
    base64). It refuses short and one-class secrets; it cannot tell a random token from a
    chosen phrase of the same length: generate them (docs/operations.md)."""
    if secret.isascii() and secret.isdigit():
        alphabet = 10
    elif all(c in string.hexdigits for c in secret):
        alphabet = 16
    elif secret.isascii() and secret.isalpha() and (secret.islower() or secret.isupper()):
        alphabet = 26
    else:
        alphabet = 64
    return len(secret) * math.log2(alphabet)


def check_secret(variable: str, secret: str) -> None:
    """Refuse a weak secret with an error naming the variable it came from."""
    if secret_bits(secret) < MIN_SECRET_BITS or len(set(secret)) < MIN_SECRET_DISTINCT:
        raise ParameterError(
            variable,
            f"too weak: at least {MIN_SECRET_BITS} bits, e.g. 22 random url-safe characters "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))'), from the variable "
            f"or the file {variable}_FILE names",
        )


def read_secret_file(variable: str, path: str) -> str:
    """A secret from a file (trailing newline stripped); a missing or empty file is an error."""
    try:
        secret = Path(path).read_text().strip()
    except OSError as error:
        raise ParameterError(variable, f"cannot read {path}: {error.strerror}") from None
    if not secret:
        raise ParameterError(variable, f"{path} is empty")
    return secret


def from_env(cls: type[Settings], environ: Mapping[str, str], base: Settings) -> Settings:
    """`base` with every field that has an `LDPTEL_<FIELD>` variable (or, for a secret,
    `LDPTEL_<FIELD>_FILE`) replaced by its value."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for item in fields(cls):  # type: ignore[arg-type]
        variable = env_name(item.name)
        if item.name in SECRETS and environ.get(variable + "_FILE"):
            if environ.get(variable):
                raise ParameterError(variable, f"set {variable} or {variable}_FILE, not both")
            values[item.name] = read_secret_file(variable + "_FILE", environ[variable + "_FILE"])
        elif variable in environ:
            values[item.name] = _parse(item.name, hints[item.name], environ[variable])
    return replace(base, **values)  # type: ignore[type-var]


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
    #: A request refused before the ingest script (a gzip bomb, a bad body or batch) is
    #: answered this much later (a greenlet waits; 0 = at once): a sender that waits for its
    #: answers refuses at most connections / delay per second (collector/auth.py).
    refusal_delay_seconds: float = 0.25
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
    #: Retry-After (seconds) sent with 503 when Redis is unreachable or replication is slow.
    retry_after_seconds: int = 1
    redis_socket_timeout: float = 5.0
    #: A 202 waits until this many replicas of the shard's master acknowledged the batch
    #: (Redis WAIT), else the answer is 503 and the client retries under the same key
    #: (0 = off: acknowledged once on the master; replication is asynchronous).
    redis_wait_replicas: int = 0
    #: How long a request waits for those replicas (must be shorter than the socket timeout).
    redis_wait_timeout_seconds: float = 1.0
    #: Web origins whose pages may report from a browser (CORS, collector/cors.py), comma-
    #: separated (`https://app.example,https://www.example`), `*` for any; "" = none.
    cors_origins: str = ""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CollectorConfig:
        """Settings from a mapping (e.g. parsed TOML/JSON); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParameterError(unknown[0], "unknown collector setting")
        return replace(cls(), **dict(data)).checked()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> CollectorConfig:
        """Defaults, overridden by `LDPTEL_<FIELD>` variables (`LDPTEL_RATE_LIMIT=0`,
        `LDPTEL_ADMIN_TOKEN_FILE=/run/secrets/admin_token`, ...)."""
        return from_env(cls, environ, cls()).checked()

    def checked(self) -> CollectorConfig:
        """Self, after range checks that name the setting at fault."""
        for name in ("max_body_bytes", "max_reports_per_batch", "rate_limit_seconds"):
            if getattr(self, name) < 1:
                raise ParameterError(name, "must be >= 1")
        if not self.body_timeout_seconds > 0:
            raise ParameterError("body_timeout_seconds", "must be > 0")
        if not 0 <= self.refusal_delay_seconds <= 10:
            raise ParameterError("refusal_delay_seconds", "must be between 0 and 10")
        if self.token_cache_seconds < 0:
            raise ParameterError("token_cache_seconds", "must be >= 0 (0 disables the cache)")
        if self.rate_limit < 0:
            raise ParameterError("rate_limit", "must be >= 0 (0 disables it)")
        if self.redis_wait_replicas < 0:
            raise ParameterError("redis_wait_replicas", "must be >= 0 (0 disables WAIT)")
        if not 0 < self.redis_wait_timeout_seconds < self.redis_socket_timeout:
            raise ParameterError(
                "redis_wait_timeout_seconds", "must be > 0 and < redis_socket_timeout"
            )
        if self.idempotency_seconds < DAY:
            raise ParameterError("idempotency_seconds", f"must be >= {DAY} (a day)")
        for name in sorted(SECRETS):
            secret = getattr(self, name)
            if secret is not None:
                check_secret(env_name(name), secret)
        return self


def as_config(config: CollectorConfig | Mapping[str, Any] | None) -> CollectorConfig:
    """Accept what `create_app` accepts: a CollectorConfig, a mapping, or None (defaults)."""
    if config is None:
        return CollectorConfig()
    if isinstance(config, CollectorConfig):
        return config.checked()
    return CollectorConfig.from_mapping(config)
