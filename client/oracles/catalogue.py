"""Every concrete frequency oracle, by its protocol name: what `auto` chooses among, and with
it the package's registry (ldptel.client.oracles.ORACLES adds "auto" itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from ldptel.client.oracles.base import FrequencyOracle
from ldptel.client.oracles.blh import BinaryLocalHashing
from ldptel.client.oracles.cms import CountMeanSketch, OpenDomainCMS
from ldptel.client.oracles.de import DirectEncoding
from ldptel.client.oracles.hcms import HadamardCountMeanSketch, OpenDomainHCMS
from ldptel.client.oracles.hr import HadamardResponse
from ldptel.client.oracles.olh import OpenDomainOLH, OptimizedLocalHashing
from ldptel.client.oracles.oue import OptimizedUnaryEncoding
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.oracles.she import SummationHistogramEncoding
from ldptel.client.oracles.sketch import KeySketch
from ldptel.client.oracles.ss import SubsetSelection
from ldptel.client.oracles.sue import SymmetricUnaryEncoding
from ldptel.client.oracles.the import ThresholdHistogramEncoding

#: Protocol name -> oracle class (every one but "auto").
FREQUENCY_ORACLES: dict[str, type[FrequencyOracle]] = {
    "de": DirectEncoding,
    "sue": SymmetricUnaryEncoding,
    "oue": OptimizedUnaryEncoding,
    "blh": BinaryLocalHashing,
    "olh": OptimizedLocalHashing,
    "she": SummationHistogramEncoding,
    "the": ThresholdHistogramEncoding,
    "rappor": Rappor,
    "ss": SubsetSelection,
    "hr": HadamardResponse,
    "cms": CountMeanSketch,
    "hcms": HadamardCountMeanSketch,
}

#: An open-domain campaign's mechanism: a key mechanism (client/oracles/keys.py, no domain),
#: its window state a sketch of k x m cells or a log of its reports.
OpenDomainMechanism: TypeAlias = KeySketch | OpenDomainOLH
#: Open-domain oracle name -> its key mechanism, built from (epsilon, params).
OPEN_DOMAIN_CLASSES: dict[str, Callable[..., OpenDomainMechanism]] = {
    "cms": OpenDomainCMS,
    "hcms": OpenDomainHCMS,
    "olh": OpenDomainOLH,
}
