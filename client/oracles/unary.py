"""Unary encoding (Wang et al., USENIX Security 2017, Sec. 4.2), shared by SUE and OUE.

A value v becomes d bits, bit v set; each bit is then reported independently: the true bit as
1 with probability p, every other bit as 1 with probability q, by the exact Bernoulli sampler
(samplers.py). The bit-vector wire form and the support count here are also used by full
RAPPOR and SS.

Wire form: {"bits": base64(packbits(bits))} (docs/protocol.md, "Bit vectors").
"""

from __future__ import annotations

import binascii
import math
import re
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    WireReport,
    check_probabilities,
    check_reports,
)
from ldptel.client.oracles.batch_decode import decode_base64_column
from ldptel.client.randomness import Rng
from ldptel.client.samplers import bernoulli_bits_one, bernoulli_one, sample_bernoulli

#: BYTE_BITS[b] is the 8 bits of byte value b, most significant first (packbits' order).
BYTE_BITS: NDArray[np.int64] = np.unpackbits(
    np.arange(256, dtype=np.uint8)[:, None], axis=1
).astype(np.int64)

# Temporaries are bounded by processing about this many bits (or packed bytes) at a time.
_CHUNK_BITS = 1 << 22
_CHUNK_BYTES = 1 << 18
# Below this many reports, unpacking rows beats 256-bin histograms per byte column.
_HISTOGRAM_MIN_ROWS = 1024
#: Unary reports are listed (output_law) up to this many bits: 4096 possible reports.
MAX_LISTED_BITS = 12
# Standard base64 text with "=" padding.
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


# -- bit vectors on the wire -----------------------------------------------------------------


def packed_width(nbits: int) -> int:
    """Bytes that hold `nbits` packed bits."""
    return (nbits + 7) // 8


def base64_length(nbits: int) -> int:
    """Characters of the base64 text (with `=` padding) of `nbits` packed bits."""
    return 4 * ((packed_width(nbits) + 2) // 3)


def pack_bits(bits: NDArray[Any]) -> NDArray[np.uint8]:
    """Pack an (n, nbits) array of 0/1 into (n, packed_width(nbits)) bytes, MSB first."""
    return np.packbits(np.asarray(bits, dtype=bool), axis=1)


def unpack_bits(packed: NDArray[np.uint8], nbits: int) -> NDArray[np.uint8]:
    """The (n, nbits) 0/1 array of packed rows (padding dropped)."""
    return np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, count=nbits)


def encode_bit_vectors(packed: NDArray[np.uint8]) -> list[str]:
    """The base64 text of each packed row."""
    rows = np.ascontiguousarray(packed, dtype=np.uint8)
    data, width = rows.tobytes(), rows.shape[1]
    return [
        binascii.b2a_base64(data[start : start + width], newline=False).decode("ascii")
        for start in range(0, len(data), width)
    ]


def decode_bit_vector(text: object, nbits: int, field: str, index: int | None = None) -> bytes:
    """Validate one untrusted base64 bit vector of `nbits` bits; returns its packed bytes.

    The padding bits are checked by `decode_bit_vectors` for a whole batch at once; call
    `check_padding` when decoding a single vector."""
    if not isinstance(text, str):
        raise ReportError(field, "must be a base64 string", index)
    # The length is checked first, so no oversized input is ever decoded.
    if len(text) != base64_length(nbits):
        raise ReportError(
            field, f"must be {base64_length(nbits)} base64 characters ({nbits} bits)", index
        )
    try:
        # Lenient decoding is fast; exactness comes from re-encoding below.
        raw = binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        raise ReportError(field, "is not valid base64", index) from None
    # One text per bit vector: only the canonical encoding of the decoded bytes passes, which
    # rejects characters outside the alphabet, misplaced "=", and unused bits that are set.
    if binascii.b2a_base64(raw, newline=False).decode("ascii") != text:
        if re.fullmatch(_BASE64_TEXT, text) is None:
            raise ReportError(field, "is not valid base64", index)
        raise ReportError(field, "is not canonical base64 (unused bits set)", index)
    # Texts of one length decode to 1 to 3 byte counts ("gA==" is 1 byte, "gEA=" 2).
    if len(raw) != packed_width(nbits):
        raise ReportError(
            field, f"must hold {packed_width(nbits)} bytes ({nbits} bits), got {len(raw)}", index
        )
    return raw


def check_padding(packed: NDArray[np.uint8], nbits: int, field: str, indexed: bool) -> None:
    """Reject rows whose padding bits (after bit nbits - 1) are not all zero."""
    spare = 8 * packed_width(nbits) - nbits
    if spare and len(packed):
        bad = np.flatnonzero(packed[:, -1] & np.uint8((1 << spare) - 1))
        if bad.size:
            raise ReportError(field, "padding bits must be zero", int(bad[0]) if indexed else None)


def decode_bit_vectors(reports: object, nbits: int, field: str) -> NDArray[np.uint8]:
    """Validate untrusted reports {field: base64 bit vector}; returns (n, packed_width) bytes."""
    items: Sequence[Any] = check_reports(reports)
    width = packed_width(nbits)
    packed = decode_base64_column(items, field, width)
    if packed is None:  # some report is malformed: find the first and say why
        rows = []
        for i, report in enumerate(items):
            if not isinstance(report, dict):
                raise ReportError("report", "must be an object", i)
            if field not in report:
                raise ReportError(field, "is required", i)
            rows.append(decode_bit_vector(report[field], nbits, field, i))
        packed = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), width)
    check_padding(packed, nbits, field, indexed=True)
    return packed


# -- aggregation -----------------------------------------------------------------------------


def bit_counts(packed: NDArray[np.uint8], nbits: int) -> NDArray[np.int64]:
    """Per bit position, how many packed rows have it set; memory O(nbits), not O(n * nbits).

    Many rows: a 256-bin histogram of each byte column (one bincount over offset byte values),
    times the 256 x 8 table of the bits of each byte value. Few rows: unpack them in chunks."""
    packed = np.asarray(packed, dtype=np.uint8)
    n, width = packed.shape
    counts = np.zeros((width, 8), dtype=np.int64)
    if n < _HISTOGRAM_MIN_ROWS:
        step = max(1, _CHUNK_BITS // (8 * width))
        for start in range(0, n, step):
            chunk = np.unpackbits(packed[start : start + step], axis=1)
            counts += chunk.sum(axis=0, dtype=np.int64).reshape(width, 8)
        return counts.reshape(-1)[:nbits]
    columns = min(width, _CHUNK_BYTES // 64)
    for first in range(0, width, columns):
        block = packed[:, first : first + columns]
        span = block.shape[1]
        # Column c's bins start at 257 c, not 256 c: with a 2 KiB stride, the bins of equal
        # byte values (sparse vectors are mostly 0) all fall in two L1 cache sets (6x slower).
        offsets = np.arange(span, dtype=np.intp) * 257
        histogram = np.zeros(span * 257, dtype=np.int64)
        step = max(1, _CHUNK_BYTES // span)
        for start in range(0, n, step):
            keys = block[start : start + step] + offsets
            histogram += np.bincount(keys.reshape(-1), minlength=span * 257)
        counts[first : first + span] = histogram.reshape(span, 257)[:, :256] @ BYTE_BITS
    return counts.reshape(-1)[:nbits]


# -- sampling --------------------------------------------------------------------------------


def perturb_unary(
    rng: Rng, values: NDArray[np.integer[Any]], nbits: int, p: float, q: float
) -> NDArray[np.uint8]:
    """Packed unary-encoding reports: bit values[i] of row i is 1 with probability p, every
    other bit 1 with probability q, all independent."""
    items = np.asarray(values, dtype=np.int64)
    n = items.size
    packed = np.empty((n, packed_width(nbits)), dtype=np.uint8)
    step = max(1, _CHUNK_BITS // nbits)
    for first in range(0, n, step):
        chunk = items[first : first + step]
        rows = chunk.size
        bits = sample_bernoulli(rng, q, rows * nbits).reshape(rows, nbits)
        # The true bit gets its own coin; it replaces an independent q-coin, so the law holds.
        bits[np.arange(rows), chunk] = sample_bernoulli(rng, p, rows)
        packed[first : first + rows] = np.packbits(bits, axis=1)
    return packed


# -- the oracle ------------------------------------------------------------------------------


class UnaryEncoding(PureOracle):
    """Unary encoding with per-bit probabilities p (true bit) and q (other bits), p > q;
    a report supports each item whose bit is set (p* = p, q* = q). A config serves p and q
    (`derived_params`); given, they are used as they are."""

    audit_event_count = 4

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        p: float | None = None,
        q: float | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.fields = (Field("bits", "u1", width=packed_width(self.domain_size)),)
        if p is None and q is None:
            self.p, self.q = self.probabilities(self.requested_epsilon)
            return
        self.p, self.q = check_probabilities(p, q)
        self.check_served("p")

    def derived_params(self) -> dict[str, Any]:
        return {"p": self.p, "q": self.q}

    @staticmethod
    @abstractmethod
    def probabilities(epsilon: float) -> tuple[float, float]:
        """(p, q) for the requested epsilon."""

    @property
    def epsilon(self) -> float:
        # Wang et al. 2017, Thm. 2: UE is eps-LDP for eps = ln(p(1-q) / ((1-p)q)); the worst
        # pair of inputs flips the two bits that differ, the other bits cancel.
        p, q = self.p, self.q
        if p >= 1.0 or q <= 0.0:
            return math.inf
        return math.log(p) - math.log(q) + math.log1p(-q) - math.log1p(-p)

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return self.q

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        return {"bits": perturb_unary(rng, values, self.domain_size, self.p, self.q)}

    def perturb_one(self, value: int) -> WireReport:
        # perturb_unary's law for one report: d q-coins (one CSPRNG read), the true bit's
        # replaced by a p-coin.
        bits = bernoulli_bits_one(self.q, self.domain_size)
        bits[value] = bernoulli_one(self.p)
        return {
            "bits": binascii.b2a_base64(np.packbits(bits).tobytes(), newline=False).decode("ascii")
        }

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"bits": text} for text in encode_bit_vectors(batch["bits"])]

    def decode(self, reports: object) -> ReportBatch:
        return {"bits": decode_bit_vectors(reports, self.domain_size, "bits")}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return bit_counts(batch["bits"], self.domain_size)

    @property
    def output_count(self) -> int | None:
        return 1 << self.domain_size if self.domain_size <= MAX_LISTED_BITS else None

    def output_index(self, batch: ReportBatch) -> NDArray[np.int64]:
        # The d bits as a number, item 0 the most significant.
        bits = unpack_bits(batch["bits"], self.domain_size).astype(np.int64)
        return bits @ (1 << np.arange(self.domain_size - 1, -1, -1, dtype=np.int64))

    def output_law(self, value: int) -> NDArray[np.float64]:
        # Independent bits: p for bit v, q for the others (output_index's bit order).
        d = self.domain_size
        bits = (np.arange(1 << d)[:, None] >> np.arange(d - 1, -1, -1)) & 1
        one = np.full(d, self.q)
        one[value] = self.p
        law: NDArray[np.float64] = np.prod(np.where(bits == 1, one, 1 - one), axis=1)
        return law

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: 2 * bit[low] + bit[high] for the pair's smaller and larger item; the other
        # bits have the same law under both inputs, so the loss is all in these two.
        low, high = min(value, other), max(value, other)
        packed = batch["bits"]

        def bit(item: int) -> NDArray[np.int64]:
            return ((packed[:, item >> 3] >> (7 - (item & 7))) & 1).astype(np.int64)

        return 2 * bit(low) + bit(high)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # bit[value] ~ Bernoulli(p) and bit[other] ~ Bernoulli(q), independent.
        at_low, at_high = (self.p, self.q) if value < other else (self.q, self.p)
        low = np.array([1 - at_low, at_low])
        high = np.array([1 - at_high, at_high])
        return np.outer(low, high).reshape(-1)
