"""Subset Selection (Ye & Barg, IEEE Trans. IT 2018; Wang et al., arXiv:1602.07387, 2016).

A report is a subset of k of the d items that contains the true value with probability
p = k e^eps / (k e^eps + d - k); the rest of the subset is uniform among the other items.
Wire form: {"bits": base64(packbits(d bits))}, bit i set iff item i is in the subset, exactly
k bits set (docs/protocol.md). A fixed d-bit vector beats a list of k indices in JSON unless
e^eps > ~25, and makes validation and support a vectorized popcount / column sum.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    WireReport,
    check_int,
    check_probability,
)
from ldptel.client.oracles.unary import (
    bit_counts,
    decode_bit_vectors,
    encode_bit_vectors,
    packed_width,
)
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_bernoulli, sample_subsets

#: Reports perturbed at once: about 4M bits of them.
BITS_PER_CHUNK = 1 << 22


def default_subset_size(domain_size: int, epsilon: float) -> int:
    """k = max(1, round(d / (e^eps + 1))), the size minimizing the variance (Wang et al. 2016),
    at most d - 1; Python's round, a tie going to the even integer. Configs carry the k they
    were created with (docs/protocol.md, "Derived parameters")."""
    return max(1, min(domain_size - 1, round(domain_size / (math.exp(epsilon) + 1))))


def item_bits(packed: NDArray[np.uint8], item: int) -> NDArray[np.int64]:
    """Bit `item` of each packed row (MSB-first packing)."""
    column = packed[:, item >> 3].astype(np.int64)
    return (column >> (7 - (item & 7))) & 1


class SubsetSelection(PureOracle):
    """k-subset mechanism: P[subset S | v] is p / C(d-1, k-1) if v in S else
    (1-p) / C(d-1, k), whose ratio over two inputs is at most e^eps. A config serves k and p
    (`derived_params`); given, they are used as they are."""

    name = "ss"
    audit_event_count = 4

    def __init__(
        self, *, epsilon: float, domain_size: int, k: int | None = None, p: float | None = None
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        self.k = (
            default_subset_size(d, self.requested_epsilon)
            if k is None
            else check_int(k, "k", 1, d - 1)
        )
        self.fields = (Field("bits", "u1", packed_width(d)),)
        if p is None:
            e = math.exp(self.requested_epsilon)
            self.p = self.k * e / (self.k * e + d - self.k)
        else:
            self.p = check_probability(p, "p", low=self.k / d)
            self.check_served("p")

    def derived_params(self) -> dict[str, Any]:
        return {"k": self.k, "p": self.p}

    @property
    def epsilon(self) -> float:
        # Ratio of the two subset probabilities above: p/(1-p) * C(d-1,k)/C(d-1,k-1)
        # = p/(1-p) * (d-k)/k, which is e^eps for the p chosen.
        d, k, p = self.domain_size, self.k, self.p
        return math.log(p / (1 - p) * (d - k) / k)

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        # An item other than the true one is in S with probability
        # p (k-1)/(d-1) (true value in S, k-1 others) + (1-p) k/(d-1) (true value not in S).
        d, k, p = self.domain_size, self.k, self.p
        return (p * (k - 1) + (1 - p) * k) / (d - 1)

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        items = np.asarray(values, dtype=np.int64)
        d, width = self.domain_size, self.fields[0].width
        rows = max(1, BITS_PER_CHUNK // d)
        # Written in place: joining copies faults in fresh pages (measured up to 1.4x slower).
        packed = np.empty((items.size, width), dtype=np.uint8)
        for first in range(0, items.size, rows):
            chunk = items[first : first + rows]
            packed[first : first + chunk.size] = self._subsets(chunk, rng)[:, :width]
        return {"bits": packed}

    def _subsets(self, values: NDArray[np.int64], rng: Rng) -> NDArray[np.uint8]:
        """Packed reports (in whole words): the true value with probability p, and the other
        items a uniform (k - [v in S])-subset of the d - 1 positions [0, d-1), in which
        position v stands for item d-1 (any bijection onto the other items keeps it uniform;
        sample_subsets leaves bit d-1 clear). Then v's own bit is set."""
        others = self.domain_size - 1
        include = sample_bernoulli(rng, self.p, values.size)
        packed = sample_subsets(rng, others, self.k - include.astype(np.int64))
        flat = packed.reshape(-1)
        base = np.arange(values.size, dtype=np.intp) * packed.shape[1]
        last_byte, last_mask = base + (others >> 3), np.uint8(128 >> (others & 7))
        value_byte = base + (values >> 3)
        value_mask = np.right_shift(np.uint8(128), (values & 7).astype(np.uint8))
        flat[last_byte] |= last_mask * ((flat[value_byte] & value_mask) != 0)
        flat[value_byte] = (flat[value_byte] & ~value_mask) | (value_mask * include)
        return packed

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"bits": text} for text in encode_bit_vectors(batch["bits"])]

    def decode(self, reports: object) -> ReportBatch:
        packed = decode_bit_vectors(reports, self.domain_size, "bits")
        set_bits = np.bitwise_count(packed).sum(axis=1, dtype=np.int64)
        wrong = np.flatnonzero(set_bits != self.k)
        if wrong.size:
            raise ReportError("bits", f"must have exactly k = {self.k} bits set", int(wrong[0]))
        return {"bits": packed}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return bit_counts(batch["bits"], self.domain_size)

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: (lower item in S, higher item in S); the likelihood ratio of a subset
        # depends only on these two memberships.
        low, high = min(value, other), max(value, other)
        packed = batch["bits"]
        return 2 * item_bits(packed, low) + item_bits(packed, high)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        d, k, p = self.domain_size, self.k, self.p
        both = p * (k - 1) / (d - 1)
        only_value = p * (d - k) / (d - 1)
        only_other = (1 - p) * k / (d - 1)
        neither = (1 - p) * (d - 1 - k) / (d - 1)
        only_low, only_high = (
            (only_value, only_other) if value < other else (only_other, only_value)
        )
        return np.array([neither, only_high, only_low, both])
