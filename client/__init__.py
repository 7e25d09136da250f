"""ldptel's client: the frequency oracles (the protocol math) and the app-side SDK."""

from typing import Any

from ldptel.client.errors import LdptelError, ParameterError, ReportError
from ldptel.client.oracles import ORACLES, FrequencyOracle, make_oracle

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "LdptelError",
    "ParameterError",
    "ReportError",
    "Reporter",
    "make_oracle",
]


def __getattr__(name: str) -> Any:
    # The Reporter (requests, sqlite3, a thread) loads on first use: the collector and the
    # aggregator import ldptel.client for the oracles only.
    if name == "Reporter":
        from ldptel.client.reporter import Reporter

        return Reporter
    raise AttributeError(f"module 'ldptel.client' has no attribute {name!r}")
