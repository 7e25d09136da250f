"""The frequency oracles, by their protocol names.

One module per oracle; the client perturbs, the collector validates and the aggregator
estimates with the same class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.auto import AUTO_ORACLE
from ldptel.client.oracles.base import FrequencyOracle, PureOracle, ReportBatch, WireReport
from ldptel.client.oracles.catalogue import (
    FREQUENCY_ORACLES,
    OPEN_DOMAIN_CLASSES,
    OpenDomainMechanism,
)

#: Protocol name -> oracle class. Explicit, so a name on the wire always means one class.
ORACLES: dict[str, type[FrequencyOracle]] = {**FREQUENCY_ORACLES, "auto": AUTO_ORACLE}

#: Other names people know the same oracles by.
ALIASES: dict[str, str] = {"krr": "de", "rappor-basic": "sue"}


def oracle_class(name: str) -> type[FrequencyOracle]:
    """The oracle class registered under `name` (or an alias)."""
    key = ALIASES.get(name, name)
    if key not in ORACLES:
        known = ", ".join(sorted(ORACLES))
        raise ParameterError("oracle", f"unknown oracle {name!r}; known: {known}")
    return ORACLES[key]


def open_domain_class(name: str) -> Callable[..., OpenDomainMechanism]:
    """The key mechanism of an open-domain campaign's oracle `name` (OPEN_DOMAIN_CLASSES:
    cms, hcms, olh; no domain)."""
    if name not in OPEN_DOMAIN_CLASSES:
        known = ", ".join(sorted(OPEN_DOMAIN_CLASSES))
        raise ParameterError("oracle", f"an open-domain campaign takes {known}, not {name!r}")
    return OPEN_DOMAIN_CLASSES[name]


def make_oracle(name: str, **params: Any) -> FrequencyOracle:
    """Build a validated oracle: `make_oracle("olh", epsilon=1.0, domain_size=64)`."""
    return oracle_class(name)(**params)


__all__ = [
    "ALIASES",
    "ORACLES",
    "FrequencyOracle",
    "OpenDomainMechanism",
    "PureOracle",
    "ReportBatch",
    "WireReport",
    "make_oracle",
    "open_domain_class",
    "oracle_class",
]
