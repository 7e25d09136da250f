"""Count mean sketch (CMS; Apple Differential Privacy Team, "Learning with Privacy at Scale",
2017, client and server algorithms of CMS).

Client: draw j uniform in [0, k); v = -1 everywhere but +1 at h_j(value) (m entries); flip
each entry independently with probability f = 1/(1 + e^(eps/2)), rounded up to the 2^-32 grid
of the uniform words it is drawn with (`flip_threshold`). Wire form:
{"j": int in [0, k), "bits": base64 bit vector of m bits, bit i = 1 when entry i is +1}
(docs/protocol.md, "Bit vectors" and "cms").

Server: M[j] += k (c/2 v~ + 1/2) with c = 1/(1 - 2f) = (e^(eps/2) + 1)/(e^(eps/2) - 1). The
support is S[j, i] = number of reports with row j and bit i set (k m counts, row-major);
since v~ = 2 bit - 1, (1/k) sum_j M[j, h_j(v)] = c sum_j S[j, h_j(v)] - (c - 1) n / 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    WireReport,
    check_reports,
    report_int,
)
from ldptel.client.oracles.sketch import DEFAULT_K, DEFAULT_M, SketchOracle
from ldptel.client.oracles.unary import (
    decode_bit_vectors,
    encode_bit_vectors,
    packed_width,
    unpack_bits,
)
from ldptel.client.randomness import Rng

# Reports are drawn and counted this many bits at a time (bounded temporaries).
_CHUNK_BITS = 1 << 22


def flip_threshold(epsilon: float) -> int:
    """t = ceil(2^32 / (1 + e^(eps/2))): an entry is flipped when a uniform 32-bit word is
    below t, so the flip probability is exactly t / 2^32 (>= the paper's 1/(1 + e^(eps/2)):
    the epsilon guaranteed is at most the one requested)."""
    return math.ceil(2.0**32 / (1.0 + math.exp(epsilon / 2)))


def uniform_words(rng: Rng, count: int) -> NDArray[np.uint32]:
    """`count` independent uniform 32-bit words: the halves of uniform 64-bit draws."""
    words = rng.integers(0, 1 << 64, -(-count // 2), dtype=np.uint64)
    return np.ascontiguousarray(words, dtype="<u8").view("<u4")[:count]


class CountMeanSketch(SketchOracle):
    """CMS: one row index and m noisy +-1 entries per report.

    Privacy (paper, CMS privacy theorem): one report is eps-LDP against whoever sees it, for
    any two values of the user. Given j (uniform, independent of the value), the two values'
    vectors differ in at most the two entries h_j(v), h_j(w), each flipped with probability f:
    the likelihood ratio is at most ((1 - f)/f)^2 = e^eps (1 if h_j(v) = h_j(w)).

    Variance (derived; the paper's sketch debiasing): a report adds Z = (c a + 1)/2 to the
    estimate's sum, a = its entry at h_j(v) in {-1, +1}, E[a] = s/c with s = +1 if its bucket
    is h_j(v), else -1. Var[Z] = (c^2 - E[s]^2)/4: (c^2 - 1)/4 for a report of v, and
    (c^2 - (1 - 2/m)^2)/4 for another value (collision probability 1/m). So
    Var[c~_v] = (m/(m-1))^2 n (c^2 - 1)/4 + (n - n_v)/(m - 1): the noise term plus the
    hash-collision term, the only one that depends on f_v.
    """

    name = "cms"
    audit_event_count = 5

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        k: int = DEFAULT_K,
        m: int = DEFAULT_M,
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, k=k, m=m, labels=labels)
        self._threshold = np.uint32(flip_threshold(self.requested_epsilon))
        #: The exact probability that an entry is flipped.
        self.flip = int(self._threshold) / 2.0**32
        self.c = 1.0 / (1.0 - 2.0 * self.flip)
        self.fields = (Field("j", "<u2"), Field("bits", "u1", width=packed_width(self.m)))

    @property
    def epsilon(self) -> float:
        # Two entries differ between any two values, each by (1 - f)/f.
        return 2.0 * (math.log1p(-self.flip) - math.log(self.flip))

    # -- client ----------------------------------------------------------------------------
    def perturb_keys(self, keys: NDArray[np.uint64], rng: Rng) -> ReportBatch:
        n = keys.size
        rows = rng.integers(0, self.k, n)
        buckets = self.key_buckets(keys, rows)
        packed = np.empty((n, packed_width(self.m)), dtype=np.uint8)
        step = max(1, _CHUNK_BITS // self.m)
        for start in range(0, n, step):
            chunk = buckets[start : start + step]
            # bit = [entry is +1]: the flips themselves off the bucket, their negation on it.
            bits = (uniform_words(rng, chunk.size * self.m) < self._threshold).reshape(-1, self.m)
            bits[np.arange(chunk.size), chunk] ^= True
            packed[start : start + step] = np.packbits(bits, axis=1)
        return {"j": rows.astype(np.uint16), "bits": packed}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        texts = encode_bit_vectors(batch["bits"])
        return [{"j": j, "bits": text} for j, text in zip(batch["j"].tolist(), texts, strict=True)]

    def decode(self, reports: object) -> ReportBatch:
        items = check_reports(reports)
        rows = np.empty(len(items), dtype=np.uint16)
        for i, report in enumerate(items):
            if not isinstance(report, dict):
                raise ReportError("report", "must be an object", i)
            rows[i] = report_int(report, "j", self.k, i)
        return {"j": rows, "bits": decode_bit_vectors(items, self.m, "bits")}

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.k * self.m

    @property
    def support_work(self) -> int:
        return self.m

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """S[j, i]: reports with row j and bit i set, flattened row-major."""
        rows = np.asarray(batch["j"], dtype=np.int64)
        packed = np.asarray(batch["bits"], dtype=np.uint8)
        support = np.zeros((self.k, self.m), dtype=np.int64)
        step = max(1, _CHUNK_BITS // self.m)
        for start in range(0, rows.size, step):
            # Reports sorted by row; each run of one row sums to that row's bit counts.
            order = np.argsort(rows[start : start + step], kind="stable")
            sorted_rows = rows[start : start + step][order]
            first = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
            bits = unpack_bits(packed[start : start + step][order], self.m)
            support[sorted_rows[first]] += np.add.reduceat(bits, first, axis=0, dtype=np.int32)
        return support.reshape(-1)

    def debiased_rows(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        rows: NDArray[np.float64] = self.c * np.asarray(support, dtype=np.float64).reshape(
            self.k, self.m
        )
        return rows

    def offset(self, n: int) -> float:
        return (self.c - 1.0) * n / 2.0

    @property
    def own_variance(self) -> float:
        return (self.c**2 - 1.0) / 4.0

    @property
    def other_variance(self) -> float:
        return (self.c**2 - (1.0 - 2.0 / self.m) ** 2) / 4.0

    # -- privacy audit ---------------------------------------------------------------------
    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # The pair (low, high) collides under the report's j (event 4: same law under both),
        # or not: events 2 bit[h_j(low)] + bit[h_j(high)]; the other entries have one law.
        low, high = min(value, other), max(value, other)
        rows = batch["j"]
        packed = batch["bits"]
        at_low = self.buckets(np.full(rows.size, low), rows)
        at_high = self.buckets(np.full(rows.size, high), rows)

        def bit(cells: NDArray[np.int64]) -> NDArray[np.int64]:
            byte = packed[np.arange(cells.size), cells >> 3].astype(np.int64)
            bits: NDArray[np.int64] = (byte >> (7 - (cells & 7))) & 1
            return bits

        events: NDArray[np.int64] = np.where(at_low == at_high, 4, 2 * bit(at_low) + bit(at_high))
        return events

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # Collision with the real family's rate rho; else the true entry is 1 w.p. 1 - f, the
        # other's entry w.p. f, independently. Largest ratio: ((1 - f)/f)^2 = e^eps.
        rho = self.collision_rate(value, other)
        f = self.flip
        own, foreign = np.array([f, 1.0 - f]), np.array([1.0 - f, f])
        low, high = (own, foreign) if value <= other else (foreign, own)
        return np.append((1.0 - rho) * np.outer(low, high).reshape(-1), rho)
