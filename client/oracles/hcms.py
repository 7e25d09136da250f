"""Hadamard count mean sketch (HCMS; Apple Differential Privacy Team, "Learning with Privacy
at Scale", 2017, client and server algorithms of HCMS): one bit per report.

Client: draw j uniform in [0, k) and l uniform in [0, m) (m a power of two); w = H[l, h_j(v)]
with H[l, c] = (-1)^popcount(l AND c), the Sylvester-Hadamard matrix; flip its sign with
probability f = 1/(1 + e^eps) (exact samplers, samplers.py). Wire form: {"j": int in [0, k),
"l": int in [0, m), "bit": 0 or 1} (bit 1 when the sent sign is +1; docs/protocol.md, "hcms").

Server: M_H[j, l] += k c w~ with c = 1/(1 - 2f) = (e^eps + 1)/(e^eps - 1), then each row is
transformed back, M = M_H H. The support counts reports per (j, l, bit) (2 k m counts, index
2 (j m + l) + bit); with T[j, l] = count(bit 1) - count(bit 0),
(1/k) sum_j M[j, h_j(v)] = c sum_j (T H)[j, h_j(v)]: one fast Walsh-Hadamard transform per row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.hashing import lh_hash_scalar
from ldptel.client.oracles.base import Field, ReportBatch, WireReport, check_probability
from ldptel.client.oracles.batch_decode import decode_int_fields
from ldptel.client.oracles.hr import fwht, parity
from ldptel.client.oracles.sketch import DEFAULT_K, DEFAULT_M, KeySketch, SketchOracle
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_one,
    sample_bernoulli,
    sample_uniform_below,
    uniform_below_one,
)

# The direct (sparse) estimate evaluates about this many (cell, item) pairs at a time.
_CHUNK_PAIRS = 1 << 20


def flip_probability(epsilon: float) -> float:
    """1/(1 + e^eps), the probability the sign is flipped (written with e^-eps: no overflow)."""
    shrink = math.exp(-epsilon)
    return shrink / (1.0 + shrink)


class OpenDomainHCMS(KeySketch):
    """HCMS of item keys (an open-domain campaign's, no domain): a report is (j, l, one sign).

    Privacy (paper, HCMS privacy theorem): one report is eps-LDP against whoever sees it, for
    any two values of the user. Given (j, l) (uniform, independent of the value), the sign is
    H[l, h_j(v)] kept with probability 1 - f: the likelihood ratio of two values is at most
    (1 - f)/f = e^eps, and 1 when their signs agree.

    Variance (derived; the paper's debiasing): a report adds Z = c w~ H[l, h_j(v)] to the
    estimate's sum, Z^2 = c^2 and E[Z] = E_l[H[l, a] H[l, b]] = [a = b] for its bucket a and
    b = h_j(v) (rows of H are orthogonal): E[Z] = 1 for a report of v, 1/m for another value.
    So Var[c~_v] = (m/(m-1))^2 (n c^2 - n_v - (n - n_v)/m^2): the f_v term is -n_v, as for
    Hadamard response, and the hash-collision term -(n - n_v)/m^2.
    """

    name = "hcms"

    def __init__(
        self, *, epsilon: float, k: int = DEFAULT_K, m: int = DEFAULT_M, f: float | None = None
    ) -> None:
        KeySketch.__init__(self, epsilon=epsilon, k=k, m=m)  # not super(): the MRO of a subclass
        if f is None:
            self.flip = flip_probability(self.requested_epsilon)
        else:  # served by the config (derived_params), used as it is
            self.flip = check_probability(f, "f", high=0.5)
            self.check_served("f")
        self.c = 1.0 / (1.0 - 2.0 * self.flip)
        self.fields = (Field("j", "<u2"), Field("l", "<u2"), Field("bit", "u1"))

    def derived_params(self) -> dict[str, Any]:
        return {"f": self.flip}

    @staticmethod
    def check_width(m: object) -> int:
        width = KeySketch.check_width(m)
        if width & (width - 1):
            raise ParameterError("m", f"must be a power of two (Hadamard), got {width}")
        return width

    @property
    def epsilon(self) -> float:
        return math.log1p(-self.flip) - math.log(self.flip)

    # -- client ----------------------------------------------------------------------------
    def signs(
        self, cells: NDArray[np.int64], columns: NDArray[np.integer[Any]]
    ) -> NDArray[np.bool_]:
        """[H[columns, cells] = +1] as booleans."""
        positive: NDArray[np.bool_] = parity(np.asarray(columns, dtype=np.int64) & cells) == 0
        return positive

    def perturb_keys(self, keys: NDArray[np.uint64], rng: Rng) -> ReportBatch:
        rows = sample_uniform_below(rng, self.k, keys.size)
        columns = sample_uniform_below(rng, self.m, keys.size)
        flipped = sample_bernoulli(rng, self.flip, keys.size)
        positive = self.signs(self.key_buckets(keys, rows), columns) != flipped
        return {
            "j": rows.astype(np.uint16),
            "l": columns.astype(np.uint16),
            "bit": positive.astype(np.uint8),
        }

    def perturb_key(self, key: int) -> WireReport:
        # perturb_keys' law with scalar draws: j, l uniform, the sign flipped w.p. f.
        row, column = uniform_below_one(self.k), uniform_below_one(self.m)
        flipped = bernoulli_one(self.flip)
        positive = (column & (lh_hash_scalar(key, row) % self.m)).bit_count() % 2 == 0
        return {"j": row, "l": column, "bit": int(positive != flipped)}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [
            {"j": j, "l": column, "bit": bit}
            for j, column, bit in zip(
                batch["j"].tolist(), batch["l"].tolist(), batch["bit"].tolist(), strict=True
            )
        ]

    def decode(self, reports: object) -> ReportBatch:
        limits: dict[str, tuple[int, type[np.unsignedinteger[Any]]]] = {
            "j": (self.k, np.uint16),
            "l": (self.m, np.uint16),
            "bit": (2, np.uint8),
        }
        return decode_int_fields(reports, limits)

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return 2 * self.k * self.m

    @property
    def support_work(self) -> int:
        return 1

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        cells = (batch["j"].astype(np.int64) * self.m + batch["l"]) * 2 + batch["bit"]
        return np.bincount(cells, minlength=self.support_size).astype(np.int64, copy=False)

    def cell_sums(
        self,
        support: NDArray[np.int64],
        n: int,
        lane0: NDArray[np.uint32],
        lane1: NDArray[np.uint32],
    ) -> NDArray[np.float64]:
        # Few reports for the sketch's size: sum each report cell's signed count times
        # H[l, h_j(v)] directly (O(cells x items)) instead of transforming all k rows
        # (O(k m log m)); the two are equal.
        cells = np.flatnonzero(support)
        if cells.size * len(lane0) >= self.k * self.m * self.m.bit_length():
            return super().cell_sums(support, n, lane0, lane1)
        signed = self.c * np.where(cells & 1, support[cells], -support[cells])
        rows, columns = np.divmod(cells.astype(np.int64) >> 1, self.m)
        sums = np.empty(len(lane0), dtype=np.float64)
        step = max(1, _CHUNK_PAIRS // max(1, cells.size))
        for start in range(0, len(lane0), step):
            buckets = self.hashes(
                lane0[None, start : start + step],
                lane1[None, start : start + step],
                rows[:, None].astype(np.uint32),
            )
            positive = self.signs(buckets.astype(np.int64), columns[:, None])
            sums[start : start + step] = signed @ np.where(positive, 1.0, -1.0)
        return sums

    def debiased_rows(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        counts = np.asarray(support, dtype=np.int64).reshape(self.k, self.m, 2)
        return np.asarray(self.c * fwht(counts[:, :, 1] - counts[:, :, 0]), dtype=np.float64)

    def offset(self, n: int) -> float:
        return 0.0

    @property
    def own_variance(self) -> float:
        return self.c**2 - 1.0

    @property
    def other_variance(self) -> float:
        return self.c**2 - 1.0 / self.m**2


class HadamardCountMeanSketch(OpenDomainHCMS, SketchOracle):
    """HCMS over a domain of labels (a categorical campaign's): the HCMS of their item keys."""

    audit_event_count = 4

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        k: int = DEFAULT_K,
        m: int = DEFAULT_M,
        labels: Sequence[str] | None = None,
        f: float | None = None,
    ) -> None:
        OpenDomainHCMS.__init__(self, epsilon=epsilon, k=k, m=m, f=f)
        self.set_domain(domain_size, labels)

    # -- privacy audit ---------------------------------------------------------------------
    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: 2 [sign agrees with H[l, h_j(low)]] + [agrees with H[l, h_j(high)]]; the
        # report's likelihood under an input depends only on its own agreement.
        low, high = min(value, other), max(value, other)
        rows, columns = batch["j"], batch["l"]
        positive = batch["bit"].astype(bool)
        agree_low = self.signs(self.buckets(np.full(rows.size, low), rows), columns) == positive
        agree_high = self.signs(self.buckets(np.full(rows.size, high), rows), columns) == positive
        events: NDArray[np.int64] = 2 * agree_low.astype(np.int64) + agree_high
        return events

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # The two signs are equal when the items collide under j (rate rho, exact for the real
        # family) and otherwise for exactly half of the l (distinct columns of H are
        # orthogonal): P(equal) = (1 + rho)/2. The true item's sign is kept w.p. 1 - f.
        rho = self.collision_rate(value, other)
        equal, keep = (1.0 + rho) / 2.0, 1.0 - self.flip
        if value <= other:  # agreeing with low is agreeing with the truth
            agrees = ((1 - equal) * (1 - keep), (1 - equal) * keep)  # (0, 1), (1, 0)
        else:
            agrees = ((1 - equal) * keep, (1 - equal) * (1 - keep))
        return np.array([equal * (1 - keep), agrees[0], agrees[1], equal * keep])
