"""Key mechanisms: randomizers whose report depends on a value only through its item key
(docs/protocol.md, "Item key"), so any string can be reported and estimated. They are the
mechanisms of open-domain campaigns (config `max_length`, no domain list), which have no
domain: a key mechanism has no `domain_size`, no labels and no estimate over a domain, only
the estimate and exact variance of candidate strings, given by their item keys.

Why inheritance, not composition: a categorical campaign's hashing oracle (cms, hcms, olh,
blh over a list of labels) is exactly a key mechanism with a domain, whose labels are mapped
to their item keys once (`KeyedOracle`); the report, the wire form, the state and the
estimate are the key mechanism's, so each categorical oracle subclasses its key mechanism
and adds only what a domain has (labels, the estimate of every label, the privacy audit of
two labels). A wrapper would have to forward a dozen attributes (p, q, g, k, m, fields...)
that callers and tests read.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_key, item_keys, key_lanes
from ldptel.client.oracles.base import (
    FrequencyOracle,
    ReportBatch,
    WireMechanism,
    WireReport,
    check_int,
    check_labels,
)
from ldptel.client.randomness import Rng, SecureRandom, default_rng


class KeyMechanism(WireMechanism):
    """A mechanism over item keys (64-bit hashes of strings), with no domain: its report is
    a function of the value's key and fresh randomness only. The window state is a sketch's
    support (`KeySketch`, client/oracles/sketch.py) or the reports themselves (`ReportLog`:
    open-domain OLH); candidates are estimated from it by their keys."""

    @abstractmethod
    def perturb_keys(self, keys: NDArray[np.uint64], rng: Rng) -> ReportBatch:
        """Randomize values given by their item keys, each independently."""

    def perturb_key(self, key: int) -> WireReport:
        """One report of an item key from the client's CSPRNG. The mechanisms override it
        with scalar draws of `perturb_keys`' exact law (one report through numpy is mostly its
        per-call overhead)."""
        keys = np.array([key], dtype=np.uint64)
        return self.encode(self.perturb_keys(keys, default_rng()))[0]

    def perturb_string(self, value: str, rng: Rng | None = None) -> WireReport:
        """Randomize one string, any string. From the client's CSPRNG by default, through
        `perturb_key` (the SDK's path); another source goes through `perturb_keys`."""
        if rng is None or isinstance(rng, SecureRandom):
            return self.perturb_key(item_key(value))
        return self.encode(self.perturb_keys(item_keys([value]), rng))[0]

    def perturb(self, value: Any, rng: Rng | None = None) -> WireReport:
        """A key mechanism's value is a string (`perturb_string`); an oracle over a domain
        (`KeyedOracle`) takes a label's index instead."""
        if not isinstance(value, str):
            raise ParameterError("value", f"must be a string, got {type(value).__name__}")
        return self.perturb_string(value, rng)

    @abstractmethod
    def key_variance(self, n: int, frequencies: NDArray[np.float64]) -> NDArray[np.float64]:
        """Exact variance of the estimate of each candidate for n reports, over the reports'
        randomness; `frequencies` are the candidates' true relative frequencies f_v."""


class KeyedOracle(FrequencyOracle, KeyMechanism):
    """A frequency oracle over a domain of labels that is a key mechanism: label v is
    reported as its item key, item_key(labels[v]) (docs/protocol.md), so the domain adds only
    the map of labels to keys. Subclasses call `set_domain` in `__init__`."""

    takes_labels = True

    def set_domain(self, domain_size: int, labels: Sequence[str] | None) -> None:
        """The domain {0, ..., domain_size - 1} and its labels (None: "0", "1", ...)."""
        self.domain_size = check_int(domain_size, "domain_size", 2, 2**24)
        self.labels = check_labels(labels, self.domain_size)
        self._keys = item_keys(self.labels)
        self._lane0, self._lane1 = key_lanes(self._keys)

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        # The report depends on a value only through its key (KeyMechanism).
        return self.perturb_keys(self._keys[np.asarray(values, dtype=np.intp)], rng)

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        f = np.zeros(self.domain_size) if frequencies is None else np.asarray(frequencies)
        return self.key_variance(n, f)
