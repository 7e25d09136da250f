"""ldptel's client: the frequency oracles (the protocol math) and the app-side SDK."""

from ldptel.client.errors import LdptelError, ParameterError, ReportError
from ldptel.client.oracles import ORACLES, FrequencyOracle, make_oracle

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "LdptelError",
    "ParameterError",
    "ReportError",
    "make_oracle",
]
