"""Local hashing (Wang et al., USENIX Security 2017, Sec. 4.4), shared by BLH and OLH.

A report is (seed, y): the client draws a uniform 32-bit seed, hashes its value into
x = H(item_key, seed) mod g (docs/protocol.md, "Local hash") and reports x through g-ary
randomized response. Wire form: {"seed": int in [0, 2^32), "y": int in [0, g)}.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.hashing import key_lanes, lh_hash, lh_hash_lanes, lh_hash_scalar
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    WireReport,
    check_int,
    check_probability,
    check_report_epsilon,
    pure_estimate,
    pure_variance,
)
from ldptel.client.oracles.batch_decode import decode_int_fields
from ldptel.client.oracles.keys import KeyedOracle, KeyMechanism
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_one,
    sample_bernoulli,
    sample_uniform_below,
    uniform_below_one,
)

#: Largest g: y travels and is stored as an unsigned 32-bit integer.
MAX_G = 2**32 - 1
SEED_LIMIT = 2**32

# support() hashes (report, item) pairs in chunks of about this many (256 KiB of uint32):
# large enough to amortize numpy's per-call overhead, small enough that the hash's few
# temporaries stay in a core's L2 cache; never an n x d matrix.
_CHUNK_PAIRS = 1 << 16
# A chunk's per-item match counts are summed in uint16, so a chunk has at most 65535 rows
# (uint8 sums would cap small-d chunks at 255 rows, a few thousand pairs: numpy's per-call
# overhead then dominates).
_MAX_CHUNK_ROWS = 2**16 - 1
# Batches with fewer pairs than this are counted on the calling thread alone.
_PARALLEL_PAIRS = 1 << 20
_WORKERS = min(4, os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _thread_pool() -> ThreadPoolExecutor:
    # numpy's ufuncs release the GIL, so threads hashing disjoint rows run in parallel.
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="ldptel-lh")
        return _pool


class KeyLocalHashing(KeyMechanism):
    """Local hashing of item keys with g buckets (no domain): keep x = H(key, seed) mod g with
    probability p = e^eps / (e^eps + g - 1), else report one of the other g - 1 buckets
    uniformly.

    A report supports every item hashing to its y under its seed, so p* = p and, for an
    ideal hash, q* = 1/g (Wang et al. 2017, Sec. 4.4). A config serves p
    (`derived_params`); given, it is used as it is.
    """

    def __init__(self, *, epsilon: float, g: int, p: float | None = None) -> None:
        self.requested_epsilon = check_report_epsilon(epsilon)
        self.g = check_int(g, "g", 2, MAX_G)
        self.fields = (Field("seed", "<u4"), Field("y", "<u4"))
        # k-RR over the g buckets: p = e^eps / (e^eps + g - 1), written with e^-eps so it
        # cannot overflow. Each other bucket gets what the sampler leaves: (1 - p) / (g - 1).
        if p is None:
            self.p = 1.0 / (1.0 + (self.g - 1) * math.exp(-self.requested_epsilon))
        else:
            self.p = check_probability(p, "p", low=1.0 / self.g)
        self.q_other = (1.0 - self.p) / (self.g - 1)
        if p is not None:
            self.check_served("p")
        self._g = np.uint32(self.g)
        self._mask = np.uint32(self.g - 1) if self.g & (self.g - 1) == 0 else None

    def derived_params(self) -> dict[str, Any]:
        return {"p": self.p}

    # -- privacy ---------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        # eps = ln(p (g-1) / (1-p)) = ln(p / q_other) for the p perturb_batch really uses;
        # infinite if p rounded to 1 (a huge epsilon): the reports are then not randomized.
        return math.log(self.p / self.q_other) if self.q_other > 0 else math.inf

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    # -- hashing ---------------------------------------------------------------------------
    def _bucket(self, hashes: NDArray[np.uint32], scratch: NDArray[np.uint32]) -> None:
        """hashes mod g, in place (uint32 `%` is slow in numpy; `//` by a scalar is not)."""
        if self._mask is not None:
            np.bitwise_and(hashes, self._mask, out=hashes)
            return
        np.floor_divide(hashes, self._g, out=scratch)
        np.multiply(scratch, self._g, out=scratch)
        np.subtract(hashes, scratch, out=hashes)

    def key_buckets(
        self, keys: NDArray[np.uint64], seeds: NDArray[np.uint32]
    ) -> NDArray[np.uint32]:
        """x = H(key, seed) mod g for paired arrays of item keys and seeds (any string)."""
        hashes = lh_hash(np.asarray(keys, dtype=np.uint64), seeds)
        self._bucket(hashes, np.empty_like(hashes))
        return hashes

    # -- client ----------------------------------------------------------------------------
    def perturb_key(self, key: int) -> WireReport:
        # perturb_keys' law with scalar draws (the SDK's per-report path).
        seed = uniform_below_one(SEED_LIMIT)
        x = lh_hash_scalar(key, seed) % self.g
        if bernoulli_one(self.p):
            return {"seed": seed, "y": x}
        other = uniform_below_one(self.g - 1)
        return {"seed": seed, "y": other + (other >= x)}

    def perturb_keys(self, keys: NDArray[np.uint64], rng: Rng) -> ReportBatch:
        seeds = sample_uniform_below(rng, SEED_LIMIT, keys.size).astype(np.uint32)
        y = self.key_buckets(keys, seeds)
        flip = ~sample_bernoulli(rng, self.p, keys.size)
        if self.g == 2:  # the one other bucket; nothing to draw
            y[flip] ^= np.uint32(1)
            return {"seed": seeds, "y": y}
        # Only flipped reports draw from the g - 1 other buckets (fewer CSPRNG bytes):
        # uniform in [0, g-1), then skip x.
        x = y[flip]
        other = sample_uniform_below(rng, self.g - 1, x.size).astype(np.uint32)
        other += other >= x
        y[flip] = other
        return {"seed": seeds, "y": y}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [
            {"seed": seed, "y": y}
            for seed, y in zip(batch["seed"].tolist(), batch["y"].tolist(), strict=True)
        ]

    def decode(self, reports: object) -> ReportBatch:
        return decode_int_fields(
            reports, {"seed": (SEED_LIMIT, np.uint32), "y": (self.g, np.uint32)}
        )

    # -- aggregator ------------------------------------------------------------------------
    def key_estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        """Candidates' estimates from their support counts (`key_support`), n reports."""
        return pure_estimate(support, n, self.p_star, self.q_star)

    def key_variance(self, n: int, frequencies: NDArray[np.float64]) -> NDArray[np.float64]:
        return pure_variance(n, np.asarray(frequencies), self.p_star, self.q_star)

    def key_support(self, batch: ReportBatch, keys: NDArray[np.uint64]) -> NDArray[np.int64]:
        """`support` of any items, given by their item keys (an open domain's candidates):
        per key, how many reports have H(key, seed) mod g == y."""
        lane0, lane1 = key_lanes(np.asarray(keys, dtype=np.uint64))
        return self._support_lanes(batch, lane0, lane1)

    def _support_lanes(
        self, batch: ReportBatch, lane0: NDArray[np.uint32], lane1: NDArray[np.uint32]
    ) -> NDArray[np.int64]:
        seeds = np.asarray(batch["seed"], dtype=np.uint32)
        ys = np.asarray(batch["y"], dtype=np.uint32)
        n = len(seeds)
        if n * len(lane0) < _PARALLEL_PAIRS or _WORKERS == 1:
            return self._count_matches(seeds, ys, lane0, lane1)
        # Contiguous slices of reports, one per worker; partial supports add.
        bounds = np.linspace(0, n, _WORKERS + 1).astype(int)
        parts = [
            _thread_pool().submit(self._count_matches, seeds[a:b], ys[a:b], lane0, lane1)
            for a, b in itertools.pairwise(bounds.tolist())
        ]
        support = parts[0].result()
        for part in parts[1:]:
            support += part.result()
        return support

    def _count_matches(
        self,
        seeds: NDArray[np.uint32],
        ys: NDArray[np.uint32],
        item_lane0: NDArray[np.uint32],
        item_lane1: NDArray[np.uint32],
    ) -> NDArray[np.int64]:
        d = len(item_lane0)
        cols = max(1, min(d, _CHUNK_PAIRS))
        rows = max(1, min(_MAX_CHUNK_ROWS, _CHUNK_PAIRS // cols))
        scratch = np.empty((rows, cols), dtype=np.uint32)
        match = np.empty((rows, cols), dtype=np.bool_)
        support = np.zeros(d, dtype=np.int64)
        seed_column, y_column = seeds[:, None], ys[:, None]
        for c0 in range(0, d, cols):
            lane0, lane1 = item_lane0[c0 : c0 + cols], item_lane1[c0 : c0 + cols]
            width = len(lane0)
            for r0 in range(0, len(seeds), rows):
                hashes = lh_hash_lanes(lane0, lane1, seed_column[r0 : r0 + rows])
                height = len(hashes)
                self._bucket(hashes, scratch[:height, :width])
                hits = np.equal(hashes, y_column[r0 : r0 + rows], out=match[:height, :width])
                support[c0 : c0 + width] += np.add.reduce(
                    hits.view(np.uint8), axis=0, dtype=np.uint16
                )
        return support


class LocalHashing(KeyLocalHashing, PureOracle, KeyedOracle):
    """Local hashing over a domain of labels (blh, olh of a categorical campaign): the local
    hashing of their item keys, each label's support counted from the reports."""

    audit_event_count = 4

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        g: int,
        labels: Sequence[str] | None = None,
        p: float | None = None,
    ) -> None:
        KeyLocalHashing.__init__(self, epsilon=epsilon, g=g, p=p)
        self.set_domain(domain_size, labels)

    def buckets(
        self, values: NDArray[np.integer[Any]], seeds: NDArray[np.uint32]
    ) -> NDArray[np.uint32]:
        """x = H(item_key(labels[v]), seed) mod g for paired arrays of values and seeds."""
        values = np.asarray(values, dtype=np.intp)
        hashes = lh_hash_lanes(self._lane0[values], self._lane1[values], seeds)
        self._bucket(hashes, np.empty_like(hashes))
        return hashes

    def perturb_one(self, value: int) -> WireReport:
        return self.perturb_key(int(self._keys[value]))

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """For each item v, how many reports have H(v, seed) mod g == y."""
        return self._support_lanes(batch, self._lane0, self._lane1)

    # -- privacy audit ---------------------------------------------------------------------
    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events of the pair (low, high): the report supports both, low only, high only,
        # neither.
        low, high = min(value, other), max(value, other)
        seeds, ys = batch["seed"], batch["y"]
        supports_low = self.buckets(np.full(len(seeds), low), seeds) == ys
        supports_high = self.buckets(np.full(len(seeds), high), seeds) == ys
        events: NDArray[np.int64] = 3 - 2 * supports_low.astype(np.int64) - supports_high
        return events

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # Ideal-hash model: for a uniform seed, the buckets x_low and x_high are independent
        # and uniform on [0, g). With true input v (bucket x_v, kept with p, else one of the
        # g - 1 others with q_other each), and w the other item of the pair:
        #   P(both)    = P(x_w = x_v) p                          = p / g
        #   P(v only)  = P(x_w != x_v) p                         = p (g-1) / g
        #   P(w only)  = P(x_w != x_v) q_other                   = (g-1) q_other / g
        #   P(neither) = P(x_w = x_v)(1-p) + P(x_w != x_v)(g-2) q_other = (g-1)^2 q_other / g
        # (1 - p = (g-1) q_other). Their largest ratio between v and w is p / q_other = e^eps.
        g, p, q = self.g, self.p, self.q_other
        if value == other:
            return np.array([p, 0.0, 0.0, 1.0 - p])
        own, others = p * (g - 1) / g, (g - 1) * q / g
        at_low, at_high = (own, others) if value < other else (others, own)
        return np.array([p / g, at_low, at_high, (g - 1) ** 2 * q / g])
