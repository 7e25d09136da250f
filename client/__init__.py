"""ldptel's client: the frequency oracles (the protocol math) and the app-side SDK."""

from typing import TYPE_CHECKING, Any

from ldptel.client.errors import (
    BudgetExhaustedError,
    CampaignUnavailableError,
    CollectorUrlError,
    DeliveryError,
    DiskFullError,
    InternalError,
    InvalidLevelError,
    InvalidValueError,
    LdptelError,
    ParameterError,
    RedirectNotFollowedError,
    ReporterClosedError,
    ReportError,
    ReportsRefusedError,
    StateError,
    StateReadOnlyError,
    TokenRefusedError,
    UnknownCampaignError,
    ValueTypeError,
)
from ldptel.client.oracles import ORACLES, FrequencyOracle, make_oracle

if TYPE_CHECKING:  # the app's type checker sees the real classes, not __getattr__'s Any
    from ldptel.client.reporter import Reporter
    from ldptel.client.stats import Stats
    from ldptel.client.status import ReportStatus

__all__ = [
    "ORACLES",
    "BudgetExhaustedError",
    "CampaignUnavailableError",
    "CollectorUrlError",
    "DeliveryError",
    "DiskFullError",
    "FrequencyOracle",
    "InternalError",
    "InvalidLevelError",
    "InvalidValueError",
    "LdptelError",
    "ParameterError",
    "RedirectNotFollowedError",
    "ReportError",
    "ReportStatus",
    "Reporter",
    "ReporterClosedError",
    "ReportsRefusedError",
    "StateError",
    "StateReadOnlyError",
    "Stats",
    "TokenRefusedError",
    "UnknownCampaignError",
    "ValueTypeError",
    "make_oracle",
]


def __getattr__(name: str) -> Any:
    # The SDK (requests, sqlite3, a thread) loads on first use: the collector and the
    # aggregator import ldptel.client for the oracles only.
    if name == "Reporter":
        from ldptel.client.reporter import Reporter

        return Reporter
    if name == "Stats":
        from ldptel.client.stats import Stats

        return Stats
    if name == "ReportStatus":
        from ldptel.client.status import ReportStatus

        return ReportStatus
    raise AttributeError(f"module 'ldptel.client' has no attribute {name!r}")
