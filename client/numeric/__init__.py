"""The numeric mechanisms, by their protocol names (one module per mechanism family).

As with the frequency oracles, the client perturbs, the collector validates and the
aggregator estimates with the same class; see base.py for the contract and the privacy
theorem they share.
"""

from __future__ import annotations

from typing import Any

from ldptel.client.errors import ParameterError
from ldptel.client.numeric.auto import AUTO_NUMERIC, choose_mechanism
from ldptel.client.numeric.band import Piecewise
from ldptel.client.numeric.base import Distribution, NumericMechanism
from ldptel.client.numeric.dbitflip import DBitFlip
from ldptel.client.numeric.duchi import Duchi, OneBitMean
from ldptel.client.numeric.hm import Hybrid
from ldptel.client.numeric.sw import SquareWave

#: Protocol name -> mechanism class.
NUMERIC_MECHANISMS: dict[str, type[NumericMechanism]] = {
    "duchi": Duchi,
    "pm": Piecewise,
    "hm": Hybrid,
    "1bitmean": OneBitMean,
    "sw": SquareWave,
    "dbitflip": DBitFlip,
    "auto": AUTO_NUMERIC,
}


def numeric_class(name: str) -> type[NumericMechanism]:
    """The numeric mechanism registered under `name`."""
    if name not in NUMERIC_MECHANISMS:
        known = ", ".join(sorted(NUMERIC_MECHANISMS))
        raise ParameterError("oracle", f"unknown numeric mechanism {name!r}; known: {known}")
    return NUMERIC_MECHANISMS[name]


def make_mechanism(name: str, **params: Any) -> NumericMechanism:
    """Build a validated mechanism: `make_mechanism("pm", epsilon=1.0, low=0, high=10)`."""
    return numeric_class(name)(**params)


__all__ = [
    "NUMERIC_MECHANISMS",
    "Distribution",
    "NumericMechanism",
    "choose_mechanism",
    "make_mechanism",
    "numeric_class",
]
