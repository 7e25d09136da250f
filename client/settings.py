"""The Reporter's settings (keyword arguments of Reporter, docs/client.md "Settings"), checked
at the boundary; the sender reads them too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.oracles.base import check_int

#: How long (seconds) reports the collector refused the token for wait for a fixed token
#: before they are dead-lettered: a week, as long as the spool's default bounds keep a
#: week of reports offline (docs/client.md, "What the app sees").
AUTH_WAIT = 7 * 86400.0

#: on_error's type: called with the error of every report() that was not spooled for one,
#: and (from the sender's thread) with delivery errors (errors.DeliveryError).
ErrorCallback = Callable[[LdptelError], None]


@dataclass(frozen=True)
class Settings:
    """The Reporter's knobs (see Reporter's docstring)."""

    batch_size: int = 500
    max_batch_age: float = 30.0
    max_spool_rows: int = 100_000
    max_spool_bytes: int = 32 * 1024 * 1024
    max_dead_letters: int = 10_000
    timeout: float = 10.0
    backoff_base: float = 0.5
    backoff_cap: float = 300.0
    config_refresh: float = 300.0
    strict: bool = False
    enabled: bool = True
    on_error: ErrorCallback | None = None
    exit_timeout: float = 2.0
    auth_wait: float = AUTH_WAIT


class SettingsArgs(TypedDict, total=False):
    """Settings as Reporter's keyword arguments, for the app's type checker (Unpack)."""

    batch_size: int
    max_batch_age: float
    max_spool_rows: int
    max_spool_bytes: int
    max_dead_letters: int
    timeout: float
    backoff_base: float
    backoff_cap: float
    config_refresh: float
    strict: bool
    enabled: bool
    on_error: ErrorCallback | None
    exit_timeout: float
    auth_wait: float


def check_settings(given: dict[str, Any]) -> Settings:
    known = Settings.__dataclass_fields__
    for name in given:
        if name not in known:
            raise ParameterError(name, "unknown Reporter setting")
    settings = Settings(**given)
    check_int(settings.batch_size, "batch_size", 1, 5_000)
    check_int(settings.max_spool_rows, "max_spool_rows", 1)
    check_int(settings.max_spool_bytes, "max_spool_bytes", 64 * 1024)
    check_int(settings.max_dead_letters, "max_dead_letters", 0)
    for name in ("max_batch_age", "timeout", "backoff_base", "backoff_cap", "config_refresh"):
        if not _seconds(getattr(settings, name)) > 0:
            raise ParameterError(name, "must be a number of seconds > 0")
    for name in ("exit_timeout", "auth_wait"):
        if not _seconds(getattr(settings, name)) >= 0:
            raise ParameterError(name, "must be a number of seconds >= 0")
    for name in ("strict", "enabled"):
        if not isinstance(getattr(settings, name), bool):
            raise ParameterError(name, "must be True or False")
    if settings.on_error is not None and not callable(settings.on_error):
        raise ParameterError("on_error", "must be a callable taking an LdptelError, or None")
    return settings


def _seconds(value: object) -> float:
    """A number of seconds, or NaN (which fails every comparison) if `value` is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float("nan")
    return float(value)
