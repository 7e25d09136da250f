"""Errors raised at ldptel's boundaries; each names the field at fault and the reason."""

from __future__ import annotations


class LdptelError(ValueError):
    """Base of ldptel's validation errors: `field` is what was wrong, `reason` why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ParameterError(LdptelError):
    """An oracle or campaign parameter is out of its valid range."""


class ReportError(LdptelError):
    """An untrusted report failed validation; `index` is its position in the batch."""

    def __init__(self, field: str, reason: str, index: int | None = None) -> None:
        where = f"reports[{index}].{field}" if index is not None else field
        super().__init__(where, reason)
        self.index = index


# -- the Reporter SDK (ldptel.client.reporter): raised at the app's call site ---------------
class UnknownCampaignError(LdptelError):
    """The collector does not know the campaign (HTTP 404)."""


class CampaignUnavailableError(LdptelError):
    """The campaign's config is neither cached nor fetchable right now (offline, or the
    collector answered garbage); reporting can resume once it is fetched."""


class InvalidValueError(LdptelError):
    """The value is not a label of the campaign's domain (and it declares no other_label)."""


class ValueTypeError(InvalidValueError, TypeError):
    """The value is not a string."""


class InvalidLevelError(ParameterError):
    """The privacy level breaks the level rule (CampaignConfig.reporting_epsilon): `kind` is
    "unknown" (not one of the campaign's levels), "required" (missing for a campaign that
    declares levels) or "forbidden" (given for one that declares none)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__("level", reason)
        self.kind = kind


class BudgetExhaustedError(LdptelError):
    """The privacy ledger refuses the report; `field` says which limit: window_reports,
    window_epsilon or lifetime_epsilon."""


class ReporterClosedError(LdptelError):
    """report() after close()."""


class StateError(LdptelError):
    """The state database in `state_dir` could not be read or written (`field` is
    "state_dir"); the SQLite or OS error is the `__cause__`."""


class DiskFullError(StateError):
    """No space left where `state_dir` lives (SQLITE_FULL, ENOSPC, EDQUOT)."""


class StateReadOnlyError(StateError):
    """`state_dir` cannot be written: a read-only file system, file or permission."""


class DeliveryError(LdptelError):
    """An answer that retrying alone will not get past: the reports wait for a change of
    configuration (the token, the collector's URL, a proxy before it), or, for
    ReportsRefusedError, were refused for good. Passed to on_error from the sender's thread
    (docs/client.md, "What the app sees"); `status` is the answer's HTTP status. report()
    returns CAMPAIGN_UNAVAILABLE with one when a campaign's first config fetch gets it."""

    def __init__(self, field: str, reason: str, status: int | None = None) -> None:
        super().__init__(field, reason)
        self.status = status


class TokenRefusedError(DeliveryError):
    """The collector (or a proxy before it) answered 401 or 403 to the ingest token
    (`field` is "token"; the token itself is never in the message)."""


class CollectorUrlError(DeliveryError):
    """What answers at `collector_url` is not the collector's answer (a proxy's or a web
    server's 4xx page, the collector's own "no such path"); `field` is "collector_url"."""


class RedirectNotFollowedError(CollectorUrlError):
    """A redirect the SDK does not follow: to another origin (scheme, host, port: the
    token must not go there), turning a POST into a GET, or more than MAX_REDIRECTS."""


class ReportsRefusedError(DeliveryError):
    """The collector refused reports for good (a 4xx of its own: invalid reports, an unknown
    campaign, a retired config); they were moved to the dead letters."""


class InternalError(LdptelError):
    """A bug in ldptel, caught so that it does not reach the app: the original exception is
    the `__cause__`; please report it."""
