"""What became of one `Reporter.report()` call, and the errors it maps from.

report() never raises into the app by default (as posthog-python, segment's analytics-python
and sentry-sdk's capture calls): every outcome is a ReportStatus, truthy only for SPOOLED, so
`if reporter.report(...)` reads as it did when report() returned a bool.
"""

from __future__ import annotations

import enum
import errno
import sqlite3

from ldptel.client.errors import (
    BudgetExhaustedError,
    CampaignUnavailableError,
    DeliveryError,
    DiskFullError,
    InternalError,
    InvalidLevelError,
    InvalidValueError,
    LdptelError,
    ReporterClosedError,
    StateError,
    StateReadOnlyError,
    UnknownCampaignError,
)


class ReportStatus(enum.Enum):
    """The outcome of report(); only SPOOLED is truthy."""

    SPOOLED = "spooled"  # perturbed, charged and in the spool on disk
    RETIRED = "retired"  # the campaign is retired: nothing reported
    LEVEL_NOT_COLLECTED = "level_not_collected"  # the level is below the threshold strategy's
    DISABLED = "disabled"  # Reporter(enabled=False): nothing stored or sent
    BUDGET_EXHAUSTED = "budget_exhausted"
    UNKNOWN_CAMPAIGN = "unknown_campaign"
    CAMPAIGN_UNAVAILABLE = "campaign_unavailable"  # no config cached, none fetchable now
    INVALID_VALUE = "invalid_value"
    INVALID_LEVEL = "invalid_level"
    DISK_FULL = "disk_full"
    STATE_ERROR = "state_error"  # state_dir unreadable or read-only
    CLOSED = "closed"
    INTERNAL_ERROR = "internal_error"  # a bug in ldptel (logged with its traceback)

    def __bool__(self) -> bool:
        return self is ReportStatus.SPOOLED


#: Error class -> status, most specific first (isinstance order matters).
_STATUS_OF: tuple[tuple[type[LdptelError], ReportStatus], ...] = (
    (BudgetExhaustedError, ReportStatus.BUDGET_EXHAUSTED),
    (UnknownCampaignError, ReportStatus.UNKNOWN_CAMPAIGN),
    (CampaignUnavailableError, ReportStatus.CAMPAIGN_UNAVAILABLE),
    # From report() only a campaign's first config fetch meets one (a refused token, ...).
    (DeliveryError, ReportStatus.CAMPAIGN_UNAVAILABLE),
    (InvalidLevelError, ReportStatus.INVALID_LEVEL),
    (InvalidValueError, ReportStatus.INVALID_VALUE),
    (DiskFullError, ReportStatus.DISK_FULL),
    (StateError, ReportStatus.STATE_ERROR),
    (ReporterClosedError, ReportStatus.CLOSED),
)

# SQLite's primary result codes (sqlite3.h); the extended code's low byte is the primary one.
_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_FULL = 3, 8, 13
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def status_of(error: LdptelError) -> ReportStatus:
    for kind, status in _STATUS_OF:
        if isinstance(error, kind):
            return status
    return ReportStatus.INTERNAL_ERROR


def as_ldptel_error(error: Exception) -> LdptelError:
    """The LdptelError for any exception out of report(): SQLite and OS errors on the state
    become StateError subclasses (the original is the __cause__), anything else not an
    LdptelError is a bug (InternalError)."""
    if isinstance(error, LdptelError):
        return error
    wrapped: LdptelError
    if isinstance(error, sqlite3.Error):
        wrapped = _state_error(_sqlite_code(error), str(error))
    elif isinstance(error, OSError):
        wrapped = _os_error(error)
    else:
        wrapped = InternalError("reporter", f"unexpected {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def _sqlite_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)  # Python >= 3.11
    if isinstance(code, int):
        return code & 0xFF
    message = str(error)  # Python 3.10: the message is all there is
    if "disk is full" in message:
        return _SQLITE_FULL
    if "readonly" in message:
        return _SQLITE_READONLY
    return None


def _state_error(code: int | None, message: str) -> StateError:
    if code == _SQLITE_FULL:
        return DiskFullError("state_dir", f"disk full ({message})")
    if code in (_SQLITE_READONLY, _SQLITE_PERM):
        return StateReadOnlyError("state_dir", f"not writable ({message})")
    return StateError("state_dir", message)


def _os_error(error: OSError) -> StateError:
    message = f"{error.strerror or error}"
    if error.errno in _FULL_ERRNOS:
        return DiskFullError("state_dir", f"disk full ({message})")
    if error.errno in _READ_ONLY_ERRNOS:
        return StateReadOnlyError("state_dir", f"not writable ({message})")
    return StateError("state_dir", message)
