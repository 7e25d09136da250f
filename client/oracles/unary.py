"""Unary encoding (Wang et al., USENIX Security 2017, Sec. 4.2), shared by SUE and OUE.

A value v becomes d bits, bit v set; each bit is then reported independently: the true bit as
1 with probability p, every other bit as 1 with probability q. The bit-vector wire form, the
exact Bernoulli bit sampler and the support count here are also meant for full RAPPOR.
Batches with q <= 1/4 (OUE from eps ~1.1) and 512 <= d <= 4096 draw the other bits sparsely:
their exact Binomial(d-1, q) count, then a uniform subset of that size (subsets.py).

Wire form: {"bits": base64(packbits(bits))} (docs/protocol.md, "Bit vectors").
"""

from __future__ import annotations

import binascii
import functools
import math
import re
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import Field, PureOracle, ReportBatch, WireReport, check_reports
from ldptel.client.oracles.subsets import OS_BYTE_COST, fixed_up_subsets, start_probability
from ldptel.client.randomness import Rng, SecureRandom, random_bits

#: BYTE_BITS[b] is the 8 bits of byte value b, most significant first (packbits' order).
BYTE_BITS: NDArray[np.int64] = np.unpackbits(
    np.arange(256, dtype=np.uint8)[:, None], axis=1
).astype(np.int64)

# Temporaries are bounded by processing about this many bits (or packed bytes) at a time.
_CHUNK_BITS = 1 << 22
_CHUNK_BYTES = 1 << 18
# Below this many reports, unpacking rows beats 256-bin histograms per byte column.
_HISTOGRAM_MIN_ROWS = 1024
#: Sparse OUE/SUE bits (q <= 1/4): from this many reports at once (the exact Binomial
#: table costs ~30 ms at d = 1024, ~0.5 s at 4096), for d in this range. Measured (numpy,
#: eps = 4): OUE 1.9x dense at d = 1024, 2.6x at 4096, 0.4-1.2x at d <= 256 (dense wins
#: there: ~1 ns per bit); with OS randomness 7-9x.
SPARSE_MIN_ROWS = 256
SPARSE_BITS = (512, 4096)
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
    rows = []
    for i, report in enumerate(items):
        if not isinstance(report, dict):
            raise ReportError("report", "must be an object", i)
        if field not in report:
            raise ReportError(field, "is required", i)
        rows.append(decode_bit_vector(report[field], nbits, field, i))
    packed = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), packed_width(nbits))
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


def random_bytes(rng: Rng, count: int) -> NDArray[np.uint8]:
    """`count` independent uniform random bytes."""
    # rng.integers(0, 2^56) is 7 uniform bytes; the 8th (top) byte is always 0, so it is
    # overwritten with fresh bytes (an eighth as many, recursively): comparisons then run over
    # contiguous memory, ~8x faster than over the 7 useful bytes of each word. Small counts
    # (one report) skip that: fewer calls into the generator matter more there.
    if count <= 4096:
        words = np.asarray(rng.integers(0, 2**56, -(-count // 7)), dtype="<i8")
        return words.view(np.uint8).reshape(-1, 8)[:, :7].reshape(-1)[:count]
    rows = -(-count // 8)
    data = np.asarray(rng.integers(0, 2**56, rows), dtype="<i8").view(np.uint8).reshape(rows, 8)
    data[:, 7] = random_bytes(rng, rows)
    return data.reshape(-1)[:count]


def base256_digits(prob: float) -> list[int]:
    """The base-256 digits after the point of prob in [0, 1), exactly: a float is a dyadic
    rational, so there are finitely many (at most 135)."""
    numerator, denominator = prob.as_integer_ratio()
    digits = []
    while numerator:
        numerator *= 256
        digits.append(numerator // denominator)
        numerator %= denominator
    return digits


def bernoulli_bits(rng: Rng, prob: float, size: int) -> NDArray[np.bool_]:
    """`size` independent bits, each 1 with probability exactly `prob` (the float's value),
    from about 1.02 uniform random bytes per bit and no floating-point arithmetic.

    A bit is [U < prob] for a uniform U = 0.B1 B2 ... in base 256, compared one digit at a
    time with prob = 0.D1 D2 ... DL: B_j < D_j gives 1, B_j > D_j gives 0, B_j = D_j
    (probability 1/256) defers to the next byte, and equality through D_L means U >= prob.
    So P(bit = 1) = prob exactly, bits are independent, and for 0 < prob < 1 every pattern of
    bits has a positive probability."""
    if prob >= 1.0:
        return np.ones(size, dtype=bool)
    digits = base256_digits(max(prob, 0.0))
    if not digits:
        return np.zeros(size, dtype=bool)
    # Spare bytes for the later digits (~size/256 needed, 4x that is drawn), so that a small
    # batch (one report) makes one call to the generator; each byte is used once.
    pool = random_bytes(rng, size + size // 64 + 64)
    draws, spare = pool[:size], pool[size:]
    bits = draws < digits[0]
    undecided = np.flatnonzero(draws == digits[0])
    for digit in digits[1:]:
        if not undecided.size:
            break
        if spare.size >= undecided.size:
            draws, spare = spare[: undecided.size], spare[undecided.size :]
        else:
            draws = random_bytes(rng, undecided.size)
        bits[undecided[draws < digit]] = True
        undecided = undecided[draws == digit]
    return bits


class ExactBinomial:
    """Exact draws of Binomial(N, q) for a float q = a / 2^t (every float is such a dyadic
    rational): the count i whose cumulative weight interval holds a uniform integer u in
    [0, 2^(tN)), the weights being C(N, i) a^i (2^t - a)^(N-i), which add up to 2^(tN).

    u is read from its top 62 bits: the count is certain unless they equal the top bits of a
    cumulative weight (P < (N + 1) / 2^62); then the low bits decide, in exact integers.
    Building it costs O(N^2 t) bit operations (~30 ms at N = 1023), so it is built once per
    (N, q), for batches.
    """

    def __init__(self, trials: int, prob: float) -> None:
        self.trials = trials
        self.a, denominator = prob.as_integer_ratio()
        self.t = denominator.bit_length() - 1
        self.shift = max(0, self.t * trials - 62)
        self.tops = np.fromiter((c >> self.shift for c in self._cumulative()), dtype=np.int64)
        self.tops.flags.writeable = False

    def _cumulative(self) -> Iterator[int]:
        n, a, rest = self.trials, self.a, (1 << self.t) - self.a
        term, total = rest**n, 0
        for i in range(n + 1):
            total += term
            yield total
            term = term * (n - i) * a // ((i + 1) * rest) if i < n else 0

    def draw(self, rng: Rng, size: int) -> NDArray[np.int64]:
        top_total = int(self.tops[-1])  # 2^62, or 2^(tN) when that is smaller
        u_hi = rng.integers(0, top_total, size)
        counts = np.searchsorted(self.tops, u_hi, side="right")
        tied = np.flatnonzero((counts > 0) & (self.tops[np.maximum(counts - 1, 0)] == u_hi))
        for i in tied:
            counts[i] = self._exact(rng, int(u_hi[i]))
        return counts.astype(np.int64)

    def _exact(self, rng: Rng, u_hi: int) -> int:
        u = (u_hi << self.shift) + random_bits(rng, self.shift)
        return next(i for i, c in enumerate(self._cumulative()) if u < c)


@functools.lru_cache(maxsize=16)
def exact_binomial(trials: int, prob: float) -> ExactBinomial:
    """The (cached) exact Binomial(trials, prob) sampler."""
    return ExactBinomial(trials, prob)


def perturb_unary(
    rng: Rng, values: NDArray[np.integer[Any]], nbits: int, p: float, q: float
) -> NDArray[np.uint8]:
    """Packed unary-encoding reports: bit values[i] of row i is 1 with probability p, every
    other bit 1 with probability q, all independent."""
    items = np.asarray(values, dtype=np.int64)
    n = items.size
    packed = np.empty((n, packed_width(nbits)), dtype=np.uint8)
    start = _sparse_start(rng, n, nbits, q)
    step = max(1, _CHUNK_BITS // nbits)
    for first in range(0, n, step):
        chunk = items[first : first + step]
        rows = chunk.size
        if start is not None:
            # Sparse: the other bits set are a uniform subset of Binomial(d-1, q) size (iid
            # q-bits, given their count, are a uniform subset), drawn as such.
            include = bernoulli_bits(rng, p, rows)
            flipped = exact_binomial(nbits - 1, q).draw(rng, rows)
            subsets = fixed_up_subsets(chunk, include, rng, nbits, flipped + include, start)
            packed[first : first + rows] = subsets
            continue
        bits = bernoulli_bits(rng, q, rows * nbits).reshape(rows, nbits)
        # The true bit gets its own coin; it replaces an independent q-coin, so the law holds.
        bits[np.arange(rows), chunk] = bernoulli_bits(rng, p, rows)
        packed[first : first + rows] = np.packbits(bits, axis=1)
    return packed


def _sparse_start(rng: Rng, n: int, nbits: int, q: float) -> tuple[int, int] | None:
    """The Bernoulli start of the sparse sampler (subsets.py), or None for dense bits: for
    batches (the Binomial table is built once), q <= 1/4 and d in SPARSE_BITS."""
    low, high = SPARSE_BITS
    if n < SPARSE_MIN_ROWS or q > 0.25 or not low <= nbits <= high:
        return None
    byte_cost = OS_BYTE_COST if isinstance(rng, SecureRandom) else 0.0
    flipped = max(1, round(q * (nbits - 1)))
    return start_probability(nbits, flipped, 0.0, byte_cost, fixed_up_only=True)


# -- the oracle ------------------------------------------------------------------------------


class UnaryEncoding(PureOracle):
    """Unary encoding with per-bit probabilities p (true bit) and q (other bits), p > q;
    a report supports each item whose bit is set (p* = p, q* = q)."""

    audit_event_count = 4

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.p, self.q = self.probabilities(self.requested_epsilon)
        self.fields = (Field("bits", "u1", width=packed_width(self.domain_size)),)

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

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"bits": text} for text in encode_bit_vectors(batch["bits"])]

    def decode(self, reports: object) -> ReportBatch:
        return {"bits": decode_bit_vectors(reports, self.domain_size, "bits")}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return bit_counts(batch["bits"], self.domain_size)

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
