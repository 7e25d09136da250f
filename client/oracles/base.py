"""The contract every frequency oracle keeps, and the parts all of them share.

A report batch is a dict of named numpy columns (first axis = report), whose names, dtypes
and per-report widths the oracle declares in `fields`; that schema gives every oracle the
same compact storage form (`pack`/`unpack`) for the collector and the aggregator.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.randomness import Rng, SecureRandom, default_rng

ReportBatch = dict[str, NDArray[Any]]
WireReport = dict[str, Any]

#: The largest epsilon an oracle accepts. Past it a local guarantee means nothing (e^20 is
#: 5e8), and the oracles' probabilities lose their last digits in double precision: from about
#: 20.25 some oracles guarantee slightly more than requested, from 36 p or 1 - p rounds to 1 or
#: 0 (an infinite epsilon), and e^eps overflows at 710.
MAX_EPSILON = 20.0
#: A config serves the probabilities and tables an oracle was created with (docs/protocol.md,
#: "Derived parameters"); the guarantee computed from the served values may exceed the
#: config's epsilon by this much (relative, then absolute: the rounding of the derivation
#: itself, e.g. SUE's p and q at epsilon 1e-7 are exact only to ~1e-8 relative), never more.
SERVED_RELATIVE_SLACK = 1e-9
SERVED_ABSOLUTE_SLACK = 1e-12


@dataclass(frozen=True)
class Field:
    """One column of a report batch: `width` values per report (0 means a scalar)."""

    name: str
    dtype: str
    width: int = 0

    def shape(self, n: int) -> tuple[int, ...]:
        return (n, self.width) if self.width else (n,)

    def nbytes(self, n: int) -> int:
        return int(np.dtype(self.dtype).itemsize) * n * max(self.width, 1)


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """epsilon must be a finite real number > 0."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)):
        raise ParameterError(name, f"must be a number, got {type(epsilon).__name__}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(name, f"must be finite and > 0, got {value!r}")
    return value


def check_report_epsilon(epsilon: object) -> float:
    """A one-report epsilon: finite, > 0 and at most MAX_EPSILON."""
    value = check_epsilon(epsilon)
    if value > MAX_EPSILON:
        raise ParameterError(
            "epsilon",
            f"must be <= {MAX_EPSILON:g} (no meaningful privacy above), got {value!r}",
        )
    return value


def check_int(value: object, name: str, minimum: int, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(name, f"must be an integer, got {type(value).__name__}")
    number = int(value)
    if number < minimum or (maximum is not None and number > maximum):
        upper = "" if maximum is None else f", <= {maximum}"
        raise ParameterError(name, f"must be >= {minimum}{upper}, got {number}")
    return number


def check_probability(value: object, name: str, low: float = 0.0, high: float = 1.0) -> float:
    """A probability served in a config: a number in the open interval (low, high)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise ParameterError(name, f"must be a number, got {type(value).__name__}")
    number = float(value)
    if not low < number < high:
        raise ParameterError(name, f"must be in ({low:g}, {high:g}), got {number!r}")
    return number


def check_probabilities(p: object, q: object) -> tuple[float, float]:
    """A served pair of probabilities (p, q) with 0 < q < p < 1."""
    checked = check_probability(p, "p")
    return checked, check_probability(q, "q", high=checked)


def check_reports(reports: object) -> Sequence[Any]:
    """Untrusted input must be a list of report objects."""
    if not isinstance(reports, list):
        raise ReportError("reports", "must be a list")
    return reports


def default_labels(domain_size: int) -> list[str]:
    """The labels of a domain given only by its size: "0", "1", ..., str(d - 1)."""
    return [str(i) for i in range(domain_size)]


def check_labels(labels: object, domain_size: int) -> list[str]:
    """The domain's labels: domain_size distinct strings (None: the default labels)."""
    if labels is None:
        return default_labels(domain_size)
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise ParameterError("labels", "must be a sequence of strings")
    if not all(isinstance(v, str) for v in labels):
        raise ParameterError("labels", "must be a sequence of strings")
    if len(labels) != domain_size:
        raise ParameterError(
            "labels", f"must have domain_size = {domain_size} entries, got {len(labels)}"
        )
    if len(set(labels)) != len(labels):
        raise ParameterError("labels", "must be distinct")
    return list(labels)


def report_int(report: dict[str, Any], name: str, limit: int, index: int) -> int:
    """The integer field `name` of an untrusted report object, in [0, limit)."""
    if name not in report:
        raise ReportError(name, "is required", index)
    value = report[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReportError(name, "must be an integer", index)
    if not 0 <= value < limit:
        raise ReportError(name, f"must be in [0, {limit})", index)
    return value


class WireMechanism(ABC):
    """What the client and the collector need of any mechanism: its guarantee, one report on
    the client, the wire form and the compact storage form (columns declared in `fields`).
    The aggregator's window state is a support vector (`ReportMechanism`) or the reports
    themselves (`ReportLog`)."""

    name: ClassVar[str]
    #: The report batch's columns (set by each constructor).
    fields: tuple[Field, ...]
    #: The epsilon asked for; `epsilon` is the one the law actually sampled guarantees.
    requested_epsilon: float

    def fixed_params(self) -> dict[str, Any]:
        """The parameters with constant defaults that shape the report, as this mechanism has
        them; a campaign writes them into its config when created, so that a new default in a
        later version cannot change the reports of an existing campaign."""
        return {}

    def derived_params(self) -> dict[str, Any]:
        """The parameters this mechanism derived from epsilon (OLH's g, SS's k, RAPPOR's f,
        THE's theta, PM's band, every oracle's probabilities or noise table), as used; a
        campaign writes them into its config when created, so that no client derives one (its
        `exp` may differ in the last bit) and no later rounding rule changes them
        (docs/protocol.md). A mechanism built with them back is the same (it checks them:
        `check_served`)."""
        return {}

    def check_served(self, name: str) -> None:
        """Parameters read from a config (`name`), not derived, must not promise less privacy
        than its epsilon: the guarantee computed from them is at most the requested epsilon
        (up to the derivation's own rounding, SERVED_*_SLACK). A tampered or mistyped
        probability or table that would weaken the guarantee is refused here."""
        allowed = self.requested_epsilon * (1 + SERVED_RELATIVE_SLACK) + SERVED_ABSOLUTE_SLACK
        if not self.epsilon <= allowed:
            raise ParameterError(
                name,
                f"gives epsilon {self.epsilon!r}, above the config's {self.requested_epsilon!r}",
            )

    # -- privacy ---------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """The epsilon this mechanism actually guarantees for one report."""
        return self.requested_epsilon

    # -- client ----------------------------------------------------------------------------
    @abstractmethod
    def perturb(self, value: Any, rng: Rng | None = None) -> WireReport:
        """One report of `value` in its wire form, from the OS CSPRNG by default."""

    # -- wire ------------------------------------------------------------------------------
    @abstractmethod
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        """The wire form (JSON-ready dicts) of a batch of reports."""

    @abstractmethod
    def decode(self, reports: object) -> ReportBatch:
        """Validate untrusted wire reports and return them as a batch; raises ReportError."""

    def widest_reports(self) -> list[WireReport]:
        """A report of every form this mechanism sends, each with every field at its widest
        value: the collector's bound on a valid report's keys and JSON text."""
        widest = {}
        for f in self.fields:
            dtype = np.dtype(f.dtype)
            top = np.iinfo(dtype).max if dtype.kind in "iu" else np.finfo(dtype).min
            widest[f.name] = np.full(f.shape(1), top, dtype=dtype)
        return self.encode(widest)

    # -- storage (compact, trusted: written only after `decode` validated it) -------------
    def pack(self, batch: ReportBatch) -> bytes:
        """Column-wise bytes of a validated batch, in `fields` order."""
        return b"".join(
            np.ascontiguousarray(batch[f.name], dtype=f.dtype).tobytes() for f in self.fields
        )

    def unpack(self, data: bytes, n: int) -> ReportBatch:
        """Inverse of `pack` for a batch of n reports; raises ReportError if sizes differ."""
        expected = sum(f.nbytes(n) for f in self.fields)
        if len(data) != expected:
            raise ReportError("payload", f"expected {expected} bytes for {n} reports")
        batch: ReportBatch = {}
        offset = 0
        for f in self.fields:
            size = f.nbytes(n)
            column = np.frombuffer(
                data, dtype=f.dtype, count=size // np.dtype(f.dtype).itemsize, offset=offset
            )
            batch[f.name] = column.reshape(f.shape(n))
            offset += size
        return batch


class ReportMechanism(WireMechanism):
    """What every layer needs of a mechanism whose window state is an integer support vector
    that adds (a frequency oracle, a numeric mechanism, a sketch of item keys): the wire and
    storage forms, and the support for the aggregator."""

    # -- aggregator ------------------------------------------------------------------------
    @property
    @abstractmethod
    def support_size(self) -> int:
        """Length of the support vector."""

    @property
    def support_work(self) -> int:
        """Cells `support` touches per report, by which the aggregator sizes its chunks: the
        whole support vector unless a mechanism says less (a sketch touches one row)."""
        return self.support_size

    @abstractmethod
    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """Integer counts from the reports; support vectors of batches add."""


class FrequencyOracle(ReportMechanism):
    """An LDP frequency oracle over the domain {0, ..., domain_size - 1}.

    Subclasses validate their parameters in `__init__` (keyword-only), and implement
    `perturb_batch`, `encode`, `decode`, `support`, `estimate` and `variance`.
    """

    #: True if the constructor takes `labels` (the domain's values as strings), as the
    #: hashing oracles do: they hash the item key of each label (docs/protocol.md).
    takes_labels: ClassVar[bool] = False
    #: True if `estimate` is exactly unbiased with exactly `variance` (the contract tests
    #: check both); an oracle whose decoder is not (full RAPPOR's NNLS fit) sets it False.
    exact_estimator: ClassVar[bool] = True

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        self.requested_epsilon = check_report_epsilon(epsilon)
        self.domain_size = check_int(domain_size, "domain_size", 2, 2**24)

    # -- client ----------------------------------------------------------------------------
    @abstractmethod
    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        """Randomize each true value (an index into the domain) independently."""

    def perturb(self, value: int, rng: Rng | None = None) -> WireReport:
        """Randomize one value; returns its wire form. Uses the OS CSPRNG by default, through
        `perturb_one` (the SDK's path); another source goes through `perturb_batch`."""
        if not 0 <= int(value) < self.domain_size:
            raise ParameterError("value", f"must be in [0, {self.domain_size}), got {value}")
        if rng is None or isinstance(rng, SecureRandom):
            return self.perturb_one(int(value))
        return self.encode(self.perturb_batch(np.array([value], dtype=np.int64), rng))[0]

    def perturb_one(self, value: int) -> WireReport:
        """One report of a checked value from the OS CSPRNG. Oracles whose batch path is
        mostly numpy's per-call overhead for one value override it with scalar draws of the
        same exact law."""
        batch = self.perturb_batch(np.array([value], dtype=np.int64), default_rng())
        return self.encode(batch)[0]

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.domain_size

    @abstractmethod
    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """Per item, how many reports support it. Support vectors of batches add."""

    @abstractmethod
    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        """Unbiased estimate of each item's count among n reports."""

    @abstractmethod
    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """Exact per-item variance of `estimate` for n reports.

        `frequencies` are the items' true relative frequencies f_v (the f_v-dependent term);
        None means f_v = 0 for every item (the term most often quoted).
        """

    # -- the whole law, for oracles with few possible reports --------------------------------
    @property
    def output_count(self) -> int | None:
        """How many distinct reports the oracle can send, if few enough to list them
        (`output_law`); None otherwise."""
        return None

    def output_index(self, batch: ReportBatch) -> NDArray[np.int64]:
        """Each report's index in [0, output_count): which of the possible reports it is."""
        raise NotImplementedError(f"{self.name} does not list its reports")

    def output_law(self, value: int) -> NDArray[np.float64]:
        """P[report | true value] for every possible report (by `output_index`), exactly as
        the parameters give it (the Sample mechanism's exact audit mixes these laws)."""
        raise NotImplementedError(f"{self.name} does not list its reports")

    # -- privacy audit (ldptel.analysis.audit) -----------------------------------------------
    # The events partition the reports for the unordered pair {value, other}: swapping the
    # two arguments must give the SAME events in the same order (e.g. order them by
    # min(value, other), max(value, other)), so that audit_probabilities(value, other) and
    # audit_probabilities(other, value) are P[event | value] and P[event | other] for one
    # set of events, and the privacy loss is max over events of the log of their ratio.
    @abstractmethod
    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        """Map each report to one of `audit_event_count` events where the privacy loss
        between inputs `value` and `other` concentrates (used by the sampled audit).
        Symmetric: audit_events(batch, value, other) == audit_events(batch, other, value)."""

    audit_event_count: int

    @abstractmethod
    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        """Exact probability of each audit event (of the pair {value, other}) when the true
        input is `value`, derived from the oracle's parameters (used by the exact audit)."""


class PureOracle(FrequencyOracle):
    """A 'pure' protocol (Wang et al., USENIX Security 2017, Sec. 4): a report supports its
    true item with probability p* and any other item with probability q* < p*."""

    @property
    @abstractmethod
    def p_star(self) -> float: ...

    @property
    @abstractmethod
    def q_star(self) -> float: ...

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        return pure_estimate(support, n, self.p_star, self.q_star)

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        f = np.zeros(self.domain_size) if frequencies is None else np.asarray(frequencies)
        return pure_variance(n, f, self.p_star, self.q_star)


def pure_estimate(support: NDArray[np.int64], n: int, p: float, q: float) -> NDArray[np.float64]:
    """Wang et al. 2017, eq. (1): c~_v = (C_v - n q*) / (p* - q*), from support counts C_v."""
    return (np.asarray(support, dtype=np.float64) - n * q) / (p - q)


def pure_variance(n: int, f: NDArray[np.float64], p: float, q: float) -> NDArray[np.float64]:
    """Wang et al. 2017, eq. (2): Var = n q*(1-q*)/(p*-q*)^2 + n f_v (1-p*-q*)/(p*-q*), per item
    of true relative frequency f_v."""
    return n * q * (1 - q) / (p - q) ** 2 + n * f * (1 - p - q) / (p - q)


class ReportLog(WireMechanism):
    """A mechanism whose window state is its reports themselves, not a support vector that
    adds: the aggregator appends each step's reports, packed as `log_record`s, to a string
    (aggregator/state.py, "Report log"), and estimates over that log when a report is built.
    For an estimate that must evaluate every report against every candidate (OLH's
    per-report seeds on an open domain: docs/protocol.md, "olh on open domains")."""

    @property
    @abstractmethod
    def log_record(self) -> np.dtype[Any]:
        """One report in the log: a packed structured dtype (no padding)."""

    @abstractmethod
    def log_bytes(self, batch: ReportBatch) -> bytes:
        """A validated batch as log records, in report order; raises ReportError for values
        a record cannot hold (a corrupt stored batch)."""

    @abstractmethod
    def key_support(self, batch: ReportBatch, keys: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Per item key (a candidate string's), how many of the batch's reports support it;
        supports of the log's chunks add."""

    def log_batch(self, data: bytes) -> ReportBatch:
        """Log records back as a batch of contiguous columns (inverse of `log_bytes`)."""
        size = self.log_record.itemsize
        if len(data) % size:
            raise ReportError(
                "log", f"{len(data)} bytes is not a whole number of {size}-byte records"
            )
        records = np.frombuffer(data, dtype=self.log_record)
        names = self.log_record.names or ()
        return {name: np.ascontiguousarray(records[name]) for name in names}
