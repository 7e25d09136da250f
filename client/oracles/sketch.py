"""What Apple's two sketch oracles share ("Learning with Privacy at Scale", Apple Differential
Privacy Team, 2017): k public hash functions into [0, m), the k x m sketch the server builds,
and its debiased frequency oracle (the paper's Algorithm for the server, last step).

Hash j of an item (docs/protocol.md, "Sketch hash"): h_j(v) = xxh32(le64(item_key(v)), j) mod m,
the "Local hash" with seed j. A report carries the index j of the hash it used, drawn
uniformly from [0, k) on the client.

Estimate (paper, frequency oracle of CMS and HCMS): with M the debiased k x m sketch,
    c~(v) = (m / (m - 1)) * ((1/k) sum_j M[j, h_j(v)] - n / m).
Each report adds its own term Z (its debiased sketch cell at h_j(v)); E[Z] = 1 if the report's
value is v, and the collision probability 1/m otherwise (hash j random for the report), so the
estimate is unbiased and Var = (m/(m-1))^2 (n_v Var[Z | own] + (n - n_v) Var[Z | other]).

The support is the sketch's integer counts: it needs no candidate list, so any item key can be
estimated from it afterwards (`estimate_keys`). `KeySketch` is the sketch of item keys alone
(an open-domain campaign's: no domain); `SketchOracle` adds a domain of labels (categorical).

Fixed family: the k functions are public and fixed, so for one family the report of a value
w != v collides with v under a fraction rho(v, w) of the functions, not exactly 1/m; the
estimate of v is then off by (m/(m-1)) sum_w n_w (rho(v, w) - 1/m), which averages 0 over
families with mean square sum_w n_w^2 / (k (m - 1)). `variance` is over the reports'
randomness (the paper's model); `family_variance` is what a random family adds to it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.hashing import key_lanes, lh_hash_lanes
from ldptel.client.oracles.base import ReportMechanism, check_int, check_report_epsilon
from ldptel.client.oracles.keys import KeyedOracle, KeyMechanism

#: j and l travel and are stored as unsigned 16-bit integers.
MAX_ROWS = 2**16
MAX_WIDTH = 2**16
#: Defaults: the paper's sketch width m = 1024; k = 1024 rows (the paper's deployment used
#: k = 65,536: a 2^26-cell sketch, 512 MiB of int64 per window state here). k does not enter
#: the variance; it only sets the fixed-family term above (smaller with more rows).
DEFAULT_K = 1024
DEFAULT_M = 1024
# Hash evaluations (rows x items) per chunk when estimating: a few MiB of uint32 temporaries.
_CHUNK_CELLS = 1 << 20


class KeySketch(ReportMechanism, KeyMechanism):
    """k hash functions into m cells, over item keys; subclasses define the report and the
    debiased sketch. The window state is the k x m sketch (`support`)."""

    def __init__(self, *, epsilon: float, k: int = DEFAULT_K, m: int = DEFAULT_M) -> None:
        self.requested_epsilon = check_report_epsilon(epsilon)
        self.k = check_int(k, "k", 1, MAX_ROWS)
        self.m = self.check_width(m)
        self._seeds = np.arange(self.k, dtype=np.uint32)
        self._m = np.uint32(self.m)

    @staticmethod
    def check_width(m: object) -> int:
        return check_int(m, "m", 2, MAX_WIDTH)

    def fixed_params(self) -> dict[str, Any]:
        return {"k": self.k, "m": self.m}

    # -- hashing ---------------------------------------------------------------------------
    def hashes(
        self, lane0: NDArray[np.uint32], lane1: NDArray[np.uint32], rows: NDArray[np.uint32]
    ) -> NDArray[np.uint32]:
        """h_j = xxh32(le64(item_key), j) mod m, broadcasting item lanes against rows j."""
        out: NDArray[np.uint32] = lh_hash_lanes(lane0, lane1, rows) % self._m
        return out

    def key_buckets(
        self, keys: NDArray[np.uint64], rows: NDArray[np.integer[Any]]
    ) -> NDArray[np.int64]:
        """h_{rows[i]} of the item with key keys[i] (any string, in the domain or not)."""
        lane0, lane1 = key_lanes(keys)
        return self.hashes(lane0, lane1, np.asarray(rows, dtype=np.uint32)).astype(np.int64)

    # -- aggregator ------------------------------------------------------------------------
    @abstractmethod
    def debiased_rows(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        """A (k, m) array A and the constant `offset(n)` with
        (1/k) sum_j M[j, h_j(v)] = sum_j A[j, h_j(v)] - offset(n) for the paper's sketch M."""

    @abstractmethod
    def offset(self, n: int) -> float: ...

    def estimate_keys(
        self, support: NDArray[np.int64], n: int, keys: NDArray[np.uint64]
    ) -> NDArray[np.float64]:
        """The estimate of any items, given by their item keys (candidates known only after
        the reports were aggregated: open domains)."""
        lane0, lane1 = key_lanes(np.asarray(keys, dtype=np.uint64))
        return self._estimate_lanes(support, n, lane0, lane1)

    def _estimate_lanes(
        self,
        support: NDArray[np.int64],
        n: int,
        lane0: NDArray[np.uint32],
        lane1: NDArray[np.uint32],
    ) -> NDArray[np.float64]:
        sums = self.cell_sums(support, n, lane0, lane1)
        m = self.m
        # Paper, frequency oracle: c~ = m/(m-1) ((1/k) sum_j M[j, h_j(v)] - n/m).
        return (m / (m - 1)) * (sums - self.offset(n) - n / m)

    def cell_sums(
        self,
        support: NDArray[np.int64],
        n: int,
        lane0: NDArray[np.uint32],
        lane1: NDArray[np.uint32],
    ) -> NDArray[np.float64]:
        """sum_j A[j, h_j(v)] for the items of the given key lanes."""
        rows = self.debiased_rows(support, n)
        sums = np.empty(len(lane0), dtype=np.float64)
        step = max(1, _CHUNK_CELLS // self.k)
        row_index = np.arange(self.k)[:, None]
        for start in range(0, len(lane0), step):
            cells = self.hashes(
                lane0[None, start : start + step],
                lane1[None, start : start + step],
                self._seeds[:, None],
            )
            sums[start : start + step] = rows[row_index, cells].sum(axis=0)
        return sums

    @property
    @abstractmethod
    def own_variance(self) -> float:
        """Var[Z] of one report's term when its value is the item estimated."""

    @property
    @abstractmethod
    def other_variance(self) -> float:
        """Var[Z] when its value is another item (collision with probability 1/m)."""

    def family_variance(self, counts: NDArray[np.int64]) -> NDArray[np.float64]:
        """Per item v, what the fixed hash family adds to `variance` for the exact mean square
        error over random families: sum_{w != v} n_w (n_w - 1) / (k (m - 1)), from the counts
        of ALL values reported (not linear in n, hence not in `variance`).

        Derivation: given the family, the estimate is off by (m/(m-1)) sum_w n_w (rho(v, w) -
        1/m), rho(v, w) = (1/k) sum_j [h_j(v) = h_j(w)]. For a random family rho is
        Binomial(k, 1/m)/k, independent across w (3-wise independent hashes): the offset has
        mean 0 and mean square sum_w n_w^2 / (k (m - 1)). Two reports of one w share rho: their
        covariance, summed, is sum_w n_w (n_w - 1) / (k (m - 1)), the term returned; the
        remaining sum_w n_w / (k (m - 1)) of the offset's mean square is part of the reports'
        own collision term, already in `variance`.
        """
        counts = np.asarray(counts, dtype=np.float64)
        pairs = counts * (counts - 1)
        family: NDArray[np.float64] = (pairs.sum() - pairs) / (self.k * (self.m - 1))
        return family

    def key_variance(self, n: int, frequencies: NDArray[np.float64]) -> NDArray[np.float64]:
        # Reports are independent, so Var = (m/(m-1))^2 sum over reports of Var[Z]:
        # (m/(m-1))^2 (n f_v Var_own + n (1 - f_v) Var_other).
        f = np.asarray(frequencies)
        scale = (self.m / (self.m - 1)) ** 2
        return scale * n * (f * self.own_variance + (1 - f) * self.other_variance)


class SketchOracle(KeySketch, KeyedOracle):
    """A sketch over a domain of labels (a categorical campaign's cms or hcms): the sketch of
    their item keys, each label's estimate read from it."""

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        k: int = DEFAULT_K,
        m: int = DEFAULT_M,
        labels: Sequence[str] | None = None,
    ) -> None:
        KeySketch.__init__(self, epsilon=epsilon, k=k, m=m)
        self.set_domain(domain_size, labels)

    def buckets(
        self, values: NDArray[np.integer[Any]], rows: NDArray[np.integer[Any]]
    ) -> NDArray[np.int64]:
        """h_{rows[i]}(labels[values[i]]) for paired arrays of values and rows."""
        values = np.asarray(values, dtype=np.intp)
        seeds = np.asarray(rows, dtype=np.uint32)
        return self.hashes(self._lane0[values], self._lane1[values], seeds).astype(np.int64)

    def collision_rate(self, value: int, other: int) -> float:
        """rho: the fraction of the k functions under which the two items collide (exact,
        from the real family; the audit uses it)."""
        h_value = self.buckets(np.full(self.k, value), self._seeds)
        h_other = self.buckets(np.full(self.k, other), self._seeds)
        return float(np.count_nonzero(h_value == h_other)) / self.k

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        return self._estimate_lanes(support, n, self._lane0, self._lane1)
