"""Hadamard Response (Acharya, Sun, Zhang, AISTATS 2019), the high-privacy form.

Item x owns row x+1 of the K x K Sylvester-Hadamard matrix, K = the smallest power of two
>= d+1 (row 0 is all ones, so it is skipped); C_x = {y : H[x+1, y] = +1}, |C_x| = K/2, where
H[r, y] = (-1)^popcount(r & y). A report is one index y in [0, K) (log2 K bits): uniform in
C_x with probability p = e^eps/(e^eps+1), else uniform in its complement.
Wire form: {"y": int}, 0 <= y < K.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.oracles.base import Field, PureOracle, ReportBatch, WireReport, check_probability
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_one,
    sample_bernoulli,
    sample_uniform_below,
    uniform_below_one,
)


def parity(x: NDArray[np.int64]) -> NDArray[np.int64]:
    """popcount(x) mod 2 for non-negative integers below 2^32."""
    x = x ^ (x >> 16)
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return x & 1


def fwht(values: NDArray[Any]) -> NDArray[np.int64]:
    """Fast Walsh–Hadamard transform (Sylvester order): out[r] = sum_y (-1)^popcount(r&y) v[y],
    along the last axis (a power of two long; each row of a 2-D array on its own).

    log2(K) vectorized butterfly stages, O(K log K); exact in int64.
    """
    out = np.asarray(values, dtype=np.int64).copy()
    shape, size = out.shape, out.shape[-1]
    half = 1
    while half < size:
        pairs = out.reshape(-1, 2, half)
        out = np.stack((pairs[:, 0] + pairs[:, 1], pairs[:, 0] - pairs[:, 1]), axis=1)
        half *= 2
    return out.reshape(shape)


class HadamardResponse(PureOracle):
    """HR: every y in C_x has probability 2p/K and every other y 2(1-p)/K, ratio e^eps.

    It is pure (Wang et al. 2017, Sec. 4) with p* = p and q* = 1/2, because two distinct
    non-zero Hadamard rows agree on exactly half of the columns. A config serves p
    (`derived_params`); given, it is used as it is.
    """

    name = "hr"
    audit_event_count = 4

    def __init__(self, *, epsilon: float, domain_size: int, p: float | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        #: Code length: the smallest power of two >= d + 1.
        self.K = 1 << self.domain_size.bit_length()
        self.fields = (Field("y", "<u4"),)
        if p is None:
            e = math.exp(self.requested_epsilon)
            self.p = e / (e + 1)
        else:
            self.p = check_probability(p, "p", low=0.5)
            self.check_served("p")

    def derived_params(self) -> dict[str, Any]:
        return {"p": self.p}

    @property
    def epsilon(self) -> float:
        return math.log(self.p / (1 - self.p))

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return 0.5

    @property
    def support_size(self) -> int:
        # The support is the histogram of reported indices; `estimate` transforms it once.
        return self.K

    def perturb_one(self, value: int) -> WireReport:
        # perturb_batch's law with scalar draws (the SDK's per-report path).
        row = value + 1
        y = uniform_below_one(self.K)
        inside = (row & y).bit_count() % 2 == 0
        if inside != bernoulli_one(self.p):
            y ^= row & -row
        return {"y": y}

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        rows = np.asarray(values, dtype=np.int64) + 1
        y = sample_uniform_below(rng, self.K, rows.size)
        want_inside = sample_bernoulli(rng, self.p, rows.size)
        inside = parity(rows & y) == 0
        # Flipping y at the lowest set bit of the row flips H[row, y]: a bijection between
        # C_x and its complement, so y stays uniform on the side it is moved to.
        lowest = rows & -rows
        y ^= np.where(inside != want_inside, lowest, 0)
        return {"y": y.astype(np.uint32)}

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"y": y} for y in batch["y"].tolist()]

    def decode(self, reports: object) -> ReportBatch:
        return {"y": decode_int_field(reports, "y", self.K)}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return np.bincount(batch["y"], minlength=self.K).astype(np.int64)

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        # W_x = sum over reports of H[x+1, y] = (one FWHT of the index histogram)[x+1].
        # E[W_x] = n_x (2p - 1): a report from x gives +1 w.p. p, and a report from any
        # other item has mean 0 (rows agree on half the columns); so c~_x = W_x / (2p - 1).
        # Var = n / (2p-1)^2 - n_x, which is Wang et al.'s eq. (2) with p* = p, q* = 1/2.
        walsh = fwht(support)
        return walsh[1 : self.domain_size + 1] / (2 * self.p - 1)

    @property
    def output_count(self) -> int:
        return self.K

    def output_index(self, batch: ReportBatch) -> NDArray[np.int64]:
        return batch["y"].astype(np.int64)

    def output_law(self, value: int) -> NDArray[np.float64]:
        # Uniform on C_v with p, uniform on its complement with 1 - p (K/2 indices each).
        inside = parity((value + 1) & np.arange(self.K, dtype=np.int64)) == 0
        return np.where(inside, 2 * self.p / self.K, 2 * (1 - self.p) / self.K)

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: (y in C_low, y in C_high); the likelihood ratio of y depends only on these.
        low, high = min(value, other), max(value, other)
        y = batch["y"].astype(np.int64)
        in_low = 1 - parity((low + 1) & y)
        in_high = 1 - parity((high + 1) & y)
        return 2 * in_low + in_high

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # C_value and C_other split [0, K) into four quarters; y is uniform on each side.
        p = self.p
        only_value, only_other = p / 2, (1 - p) / 2
        only_low, only_high = (
            (only_value, only_other) if value < other else (only_other, only_value)
        )
        return np.array([(1 - p) / 2, only_high, only_low, p / 2])
