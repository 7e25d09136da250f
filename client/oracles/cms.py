"""Count mean sketch (CMS; Apple Differential Privacy Team, "Learning with Privacy at Scale",
2017, client and server algorithms of CMS).

Client: draw j uniform in [0, k); v = -1 everywhere but +1 at h_j(value) (m entries); flip
each entry independently with probability 1/(1 + e^(eps/2)). As bits (1 = entry +1) that is
symmetric unary encoding over the m entries with the true position at h_j(value): bit
h_j(value) is 1 with p = e^(eps/2)/(e^(eps/2) + 1), every other bit with q = 1 - p, drawn by
the exact samplers (unary.perturb_unary). Wire form:
{"j": int in [0, k), "bits": base64 bit vector of m bits} (docs/protocol.md, "cms").

Server: the paper's sketch is M[j] += k (c/2 v~ + 1/2) with c = (e^(eps/2) + 1)/(e^(eps/2) - 1)
= 1/(p - q). The support is S[j, i] = number of reports with row j and bit i set (k m counts,
row-major); with v~ = 2 bit - 1, (1/k) sum_j M[j, h_j(v)] = (sum_j S[j, h_j(v)] - n q)/(p - q)
(written with p and q as drawn, so it stays exact when the floats p and 1 - q differ).
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.hashing import lh_hash_scalar
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    WireReport,
    check_probabilities,
    check_reports,
)
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.oracles.sketch import DEFAULT_K, DEFAULT_M, KeySketch, SketchOracle
from ldptel.client.oracles.sue import SymmetricUnaryEncoding
from ldptel.client.oracles.unary import (
    decode_bit_vectors,
    encode_bit_vectors,
    packed_width,
    perturb_unary,
    unpack_bits,
)
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_bits_one,
    bernoulli_one,
    sample_uniform_below,
    uniform_below_one,
)

# Reports of one row summed at once: a byte counter holds 255.
_ROW_BLOCK = 255


class OpenDomainCMS(KeySketch):
    """CMS of item keys (an open-domain campaign's, no domain): one row index and m noisy +-1
    entries per report.

    Privacy (paper, CMS privacy theorem): one report is eps-LDP against whoever sees it, for
    any two values of the user. Given j (uniform, independent of the value), the two values'
    bits differ in law at most at h_j(v) and h_j(w): the likelihood ratio is at most
    p (1 - q) / ((1 - p) q) = e^eps (1 if h_j(v) = h_j(w)).

    Variance (derived; the paper's debiasing): a report adds Z = (X - q)/(p - q) to the
    estimate's sum, X its bit at h_j(v): E[Z] = 1 for a report of v, and 1/m for another
    value (its bucket collides with h_j(v) with probability 1/m), so
    Var[Z] = p(1 - p)/(p - q)^2 for a report of v and pi(1 - pi)/(p - q)^2 with
    pi = q + (p - q)/m for another one. With q = 1 - p and c = 1/(p - q):
    Var[c~_v] = (m/(m-1))^2 n (c^2 - 1)/4 + (n - n_v)/(m - 1), the noise term plus the
    hash-collision term, the only one that depends on f_v.
    """

    name = "cms"

    def __init__(
        self,
        *,
        epsilon: float,
        k: int = DEFAULT_K,
        m: int = DEFAULT_M,
        p: float | None = None,
        q: float | None = None,
    ) -> None:
        KeySketch.__init__(self, epsilon=epsilon, k=k, m=m)  # not super(): the MRO of a subclass
        if p is None and q is None:
            self.p, self.q = SymmetricUnaryEncoding.probabilities(self.requested_epsilon)
        else:  # served by the config (derived_params), used as they are
            self.p, self.q = check_probabilities(p, q)
            self.check_served("p")
        self.c = 1.0 / (self.p - self.q)
        self.fields = (Field("j", "<u2"), Field("bits", "u1", width=packed_width(self.m)))

    def derived_params(self) -> dict[str, Any]:
        return {"p": self.p, "q": self.q}

    @property
    def epsilon(self) -> float:
        # Two bits differ in law between any two values: ln(p(1 - q) / ((1 - p) q)).
        p, q = self.p, self.q
        return math.log(p) - math.log(q) + math.log1p(-q) - math.log1p(-p)

    # -- client ----------------------------------------------------------------------------
    def perturb_keys(self, keys: NDArray[np.uint64], rng: Rng) -> ReportBatch:
        rows = sample_uniform_below(rng, self.k, keys.size)
        bits = perturb_unary(rng, self.key_buckets(keys, rows), self.m, self.p, self.q)
        return {"j": rows.astype(np.uint16), "bits": bits}

    def perturb_key(self, key: int) -> WireReport:
        # perturb_keys' law with one report's draws: the row uniform, the m q-coins from one
        # read, the own cell's coin replaced by a p-coin (as perturb_unary does).
        row = uniform_below_one(self.k)
        bits = bernoulli_bits_one(self.q, self.m)
        bits[lh_hash_scalar(key, row) % self.m] = bernoulli_one(self.p)
        text = binascii.b2a_base64(np.packbits(bits).tobytes(), newline=False).decode("ascii")
        return {"j": row, "bits": text}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        texts = encode_bit_vectors(batch["bits"])
        return [{"j": j, "bits": text} for j, text in zip(batch["j"].tolist(), texts, strict=True)]

    def decode(self, reports: object) -> ReportBatch:
        items = check_reports(reports)
        rows = decode_int_field(items, "j", self.k, np.uint16)
        return {"j": rows, "bits": decode_bit_vectors(items, self.m, "bits")}

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.k * self.m

    @property
    def support_work(self) -> int:
        # A report's temporaries are its packed bits (sorted copy) and its sort keys; the
        # unpacked bits are bounded per row block (_ROW_BLOCK x m), whatever n.
        return packed_width(self.m) + 16

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """S[j, i]: reports with row j and bit i set, flattened row-major.

        Sorted by row once; a row's reports are unpacked _ROW_BLOCK at a time and summed as
        uint64 words, each word 8 bit counters of one byte (SWAR: no carry below 256 rows).
        A row with one report (most of them in a small batch) is copied, not summed."""
        rows = np.asarray(batch["j"], dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        rows, packed = rows[order], np.asarray(batch["bits"], dtype=np.uint8)[order]
        support = np.zeros((self.k, self.m), dtype=np.int64)
        if not rows.size:
            return support.reshape(-1)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        ends = np.r_[starts[1:], rows.size]
        alone = starts[ends - starts == 1]
        support[rows[alone]] = unpack_bits(packed[alone], self.m)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            if end - start == 1:
                continue
            row = support[rows[start]]
            for first in range(start, end, _ROW_BLOCK):
                bits = np.unpackbits(packed[first : min(end, first + _ROW_BLOCK)], axis=1)
                row += bits.view(np.uint64).sum(axis=0).view(np.uint8)[: self.m]
        return support.reshape(-1)

    def debiased_rows(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        rows: NDArray[np.float64] = self.c * np.asarray(support, dtype=np.float64).reshape(
            self.k, self.m
        )
        return rows

    def offset(self, n: int) -> float:
        return n * self.q * self.c

    @property
    def own_variance(self) -> float:
        return self.p * (1.0 - self.p) * self.c**2

    @property
    def other_variance(self) -> float:
        pi = self.q + (self.p - self.q) / self.m
        return pi * (1.0 - pi) * self.c**2


class CountMeanSketch(OpenDomainCMS, SketchOracle):
    """CMS over a domain of labels (a categorical campaign's): the CMS of their item keys."""

    audit_event_count = 5

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        k: int = DEFAULT_K,
        m: int = DEFAULT_M,
        labels: Sequence[str] | None = None,
        p: float | None = None,
        q: float | None = None,
    ) -> None:
        OpenDomainCMS.__init__(self, epsilon=epsilon, k=k, m=m, p=p, q=q)
        self.set_domain(domain_size, labels)

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
        # Collision with the real family's rate rho; else the true bit is 1 w.p. p, the
        # other's bit w.p. q, independently. Largest ratio: p(1 - q)/((1 - p) q) = e^eps.
        rho = self.collision_rate(value, other)
        own, foreign = np.array([1.0 - self.p, self.p]), np.array([1.0 - self.q, self.q])
        low, high = (own, foreign) if value <= other else (foreign, own)
        return np.append((1.0 - rho) * np.outer(low, high).reshape(-1), rho)
