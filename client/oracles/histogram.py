"""Histogram encoding (Wang et al., USENIX Security 2017, Sec. 4.3) on an integer grid: the
report, its noise law and its wire form, shared by SHE (`she.py`) and THE (`the.py`).

The paper adds Laplace(2/eps) noise to a one-hot vector. Floating-point Laplace samples leak
the input through their low-order bits (Mironov, CCS 2012), so ldptel works on a fixed-point
grid of resolution R: a report is d integers

    z_i = clamp(R [i == v] + N_i, -M, M)

where the N_i are iid integer noise with weights W(k) ~ a^|k|, a = e^(-eps/(2R)) (a discrete
Laplace), tabulated with exact integers and sampled from one uniform integer per draw. Every
step of the table decays by a ratio in [1, 1/a] and its two end cells hold at least the
geometric tail, so for every output k, P(z | x=R) / P(z | x=0) lies within e^(±eps/2): the
report is eps-LDP for the law actually sampled, with no float arithmetic on the noise and no
truncated tail that could single out the true value. Clamping at M (post-processing) keeps
the wire values bounded; the estimators use the exact moments of the clamped law.
See docs/protocol.md, "Histogram encoding".

Wire form: {"z": base64 of the d values as little-endian int32}. In memory (report batches,
stream entries) the values take the narrowest of int8, int16, int32 that holds [-M, M]:
1 byte at the default R = 1 for eps >= 0.5, 2 bytes at R = 64 for eps >= ~0.1.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import itertools
import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.oracles.base import (
    Field,
    FrequencyOracle,
    ReportBatch,
    WireReport,
    check_int,
    check_reports,
)
from ldptel.client.randomness import Rng, random_bits

MAX_RESOLUTION = 4096
#: The table's weights add up to just under 2^61 (by < 2^-19): the sampler draws u from 61
#: uniform bits and rejects u >= total, which wastes a fraction < 2^-19 of the draws.
TOTAL_BITS = 61
#: The table ends where its weights fall below this (tail probability ~2^-38 at eps=1, R=64),
#: so the rounding of the tail weights stays small relative to the weights themselves.
MIN_TABLE_WEIGHT = 2**16
#: Largest clamp M (keeps the table at most ~4 MiB for tiny epsilon / R).
MAX_CLAMP = 2**18
#: Blocks of the sampler's guide table: one 16-bit uniform picks a block.
GUIDE_BLOCKS = 1 << 16
#: Draws of at least this many values take the PairSampler (when it applies).
PAIR_MIN_VALUES = 1 << 14
#: Report values are drawn in chunks of about this many (cache-sized temporaries; measured
#: fastest among 2^16..2^20).
CHUNK_VALUES = 1 << 18


class GridNoise:
    """The noise law of one report coordinate on the grid (exact integer weights).

    `weights[j + half_width]` is the weight of noise j in [-half_width, half_width] (the two
    end cells hold the tails); a coordinate with input x in {0, R} is reported as
    clamp(x + noise, -clamp, clamp), with clamp = half_width - R.
    """

    def __init__(self, epsilon: float, resolution: int) -> None:
        self.resolution = resolution
        gamma = epsilon / (2 * resolution)
        # One ulp up so that a >= e^(-gamma) exactly, i.e. -ln(a) <= eps / (2R).
        a = float(np.nextafter(math.exp(-gamma), 1.0))
        if not 0.0 < a < 1.0:
            raise ParameterError("epsilon", f"too small for resolution {resolution}")
        self.a = a
        half = _weights(a, resolution)
        self.half_width = len(half) - 1
        self.clamp = self.half_width - resolution
        self.weights = _read_only(np.array(half[:0:-1] + half, dtype=np.int64))
        self.cdf = _read_only(np.cumsum(self.weights))
        self.total = int(self.cdf[-1])
        assert 1 << (TOTAL_BITS - 1) < self.total < 1 << TOTAL_BITS
        self.masses = {x: self._output_masses(x) for x in (0, resolution)}
        self.outputs = np.arange(-self.clamp, self.clamp + 1, dtype=np.int64)
        #: The narrowest integer type holding every reported value (see TableSampler).
        self.report_dtype = narrowest_int(np.array([self.clamp]))

    # -- the law of a reported coordinate --------------------------------------------------
    def _output_masses(self, x: int) -> NDArray[np.int64]:
        """Integer masses of clamp(x + noise, -M, M) over k = -M..M (they sum to total)."""
        M, L = self.clamp, self.half_width
        inner = self.weights[L - M + 1 - x : L + M - x]
        low = self.cdf[L - M - x]
        high = self.total - self.cdf[L + M - x - 1]
        return _read_only(np.concatenate(([low], inner, [high])).astype(np.int64))

    def probabilities(self, x: int) -> NDArray[np.float64]:
        """P(z = k | input x) for k = -M..M, x in {0, R}."""
        return self.masses[x] / float(self.total)

    def mean(self, x: int) -> float:
        return float(np.dot(self.outputs.astype(np.float64), self.probabilities(x)))

    def variance(self, x: int) -> float:
        centered = self.outputs.astype(np.float64) - self.mean(x)
        return float(np.dot(centered * centered, self.probabilities(x)))

    def exceed(self, x: int, thresholds: NDArray[np.int64]) -> NDArray[np.float64]:
        """P(z > t | input x) for each integer threshold t (summed exactly in integers)."""
        above = np.concatenate((np.cumsum(self.masses[x][::-1])[::-1], [0]))
        index = np.clip(np.asarray(thresholds, dtype=np.int64) + self.clamp + 1, 0, above.size - 1)
        result: NDArray[np.float64] = above[index] / float(self.total)
        return result

    @functools.cached_property
    def epsilon(self) -> float:
        """The report's privacy loss: two coordinates change (R -> 0 and 0 -> R), each by at
        most max_k |ln P(k | R) / P(k | 0)| <= R ln(1/a) <= eps/2."""
        loss = np.log(self.masses[self.resolution].astype(np.float64)) - np.log(
            self.masses[0].astype(np.float64)
        )
        return float(loss.max() + (-loss).max())

    # -- sampling --------------------------------------------------------------------------
    @functools.cached_property
    def _noise_sampler(self) -> TableSampler:
        return TableSampler(self.cdf, np.arange(-self.half_width, self.half_width + 1))

    @functools.cached_property
    def _report_samplers(self) -> dict[int, TableSampler]:
        # clamp(x + noise) is monotone in the noise, so inverting the noise cdf and mapping
        # each cell j to clamp(x + j) draws the clamped coordinate from the same uniform.
        cells = np.arange(-self.half_width, self.half_width + 1)
        return {
            x: TableSampler(self.cdf, np.clip(cells + x, -self.clamp, self.clamp))
            for x in (0, self.resolution)
        }

    def sample(self, rng: Rng, shape: tuple[int, ...]) -> NDArray[np.integer[Any]]:
        """Noise in [-half_width, half_width] with P(j) = weights[j] / total, exactly."""
        out = np.empty(shape, dtype=self._noise_sampler.dtype)
        self._noise_sampler.draw(rng, out)
        return out

    @functools.cached_property
    def _pair_sampler(self) -> PairSampler | None:
        # The d - 1 other coordinates of every report (x = 0): two per table lookup when
        # they fit int8 (the default grid), see PairSampler.
        if self.report_dtype != np.int8:
            return None
        return PairSampler([int(m) for m in self.masses[0]], self.outputs)

    def sample_reported(self, rng: Rng, x: int, out: NDArray[np.integer[Any]]) -> None:
        """Fill `out` (contiguous, of `report_dtype`) with independent draws of
        clamp(x + noise, -M, M), x in {0, R}: the law `probabilities(x)`, exactly."""
        # Pairs pay for their tables (~1-40 ms, once) from big draws on, not for one report.
        pairs = self._pair_sampler if x == 0 and out.size >= PAIR_MIN_VALUES else None
        (pairs or self._report_samplers[x]).draw(rng, out)


def _weights(a: float, resolution: int) -> list[int]:
    """W(0), ..., W(L): W(j+1) = ceil(a W(j)) (so W(j) / W(j+1) <= 1/a), the last cell W(L)
    the geometric tail ceil(W(L-1) a / (1-a)); exact integer arithmetic on a's binary value."""
    num, den = a.as_integer_ratio()
    # The weights sum to ~center (1+a)/(1-a) plus the ceilings' excess (<< 2^-20 of it).
    center = max(1, math.floor(2.0**TOTAL_BITS * (1 - 2.0**-20) * (1.0 - a) / (1.0 + a)))
    weights = [center]
    # The clamp M: where weights fall below MIN_TABLE_WEIGHT, at least R + 1, at most MAX_CLAMP.
    while len(weights) <= resolution + 1 or (
        weights[-1] >= MIN_TABLE_WEIGHT and len(weights) <= MAX_CLAMP
    ):
        weights.append(-(-weights[-1] * num // den))
    # R more cells so that x + noise covers [-M - R, M] for x in {0, R}, then the tail cell.
    for _ in range(resolution - 1):
        weights.append(-(-weights[-1] * num // den))
    weights.append(-(-weights[-1] * num // (den - num)))
    return weights


class TableSampler:
    """Exact draws of values[c] with probability (cdf[c] - cdf[c-1]) / total, cdf the
    cumulative integer cell weights (2^32 <= total < 2^62): the value of the cell holding
    one uniform integer u in [0, 2^16 B), B = 2^s the smallest power of two with 2^16 B >=
    total, where u >= total is rejected and drawn afresh (so u is uniform on [0, total)).

    u is drawn lazily (like unary.bernoulli_bits' digits): its top 16 bits h pick one of 2^16
    equal blocks [h B, h B + B). Most blocks lie in cells of one value, looked up in a
    64K-entry guide table (cache-resident). Only for the others is the low part drawn and
    the cell found by binary search: a few % of the draws at R = 64, < 0.1% at R = 1.
    """

    def __init__(self, cdf: NDArray[np.int64], values: NDArray[np.integer[Any]]) -> None:
        self.cdf = cdf
        self.total = int(cdf[-1])
        if not 1 << 32 <= self.total < 1 << 62:
            raise ValueError("TableSampler needs 2^32 <= total < 2^62")
        self.shift = (self.total - 1).bit_length() - 16
        self.block = 1 << self.shift
        self.values = _read_only(np.asarray(values).astype(narrowest_int(values)))
        self.dtype = self.values.dtype
        # The type's minimum is the sentinel: values are clamped far inside it.
        self.unresolved = int(np.iinfo(self.dtype).min)
        starts = np.arange(GUIDE_BLOCKS, dtype=np.int64) * self.block
        ends = starts + (self.block - 1)
        # A block reaching past the total is unresolved: its draws may be rejected.
        inside = ends < self.total
        first = self.values[np.searchsorted(cdf, np.where(inside, starts, 0), side="right")]
        last = self.values[np.searchsorted(cdf, np.where(inside, ends, 0), side="right")]
        guide = np.where(inside & (first == last), first, self.unresolved)
        self.guide = _read_only(guide.astype(self.dtype))

    def draw(self, rng: Rng, out: NDArray[np.integer[Any]]) -> None:
        """Fill the contiguous array `out` (of dtype `self.dtype`) with independent draws."""
        if not out.flags.c_contiguous or out.dtype != self.dtype:
            raise ValueError(f"TableSampler.draw fills a contiguous {self.dtype} array")
        flat = out.reshape(-1)
        # Full-range 64-bit words are the cheapest uniform bits from both of our sources
        # (numpy: ~0.55 ns per 16 bits vs ~1 ns as uint16 draws); each word is 4 block indices.
        words = rng.integers(0, 1 << 64, -(-flat.size // 4), dtype=np.uint64)
        tops = words.view(np.uint16)[: flat.size]
        # mode="clip" skips the bounds check: a 16-bit index is always in the 2^16 table.
        np.take(self.guide, tops, out=flat, mode="clip")
        unresolved = np.flatnonzero(flat == self.unresolved)
        if unresolved.size:
            flat[unresolved] = self._finish(rng, tops[unresolved].astype(np.int64))

    def _finish(self, rng: Rng, top: NDArray[np.int64]) -> NDArray[np.integer[Any]]:
        """Values for draws whose top bits lie in an unresolved block: draw the low bits."""
        low = rng.integers(0, 1 << 64, top.size, dtype=np.uint64) >> np.uint64(64 - self.shift)
        u = (top << self.shift) + low.astype(np.int64)
        kept = u < self.total
        result = np.empty(top.size, dtype=self.dtype)
        result[kept] = self.values[np.searchsorted(self.cdf, u[kept], side="right")]
        if not kept.all():
            # Fresh draws replace the rejected ones: u is uniform on [0, total) when kept.
            fresh = np.empty(top.size - int(kept.sum()), dtype=self.dtype)
            self.draw(rng, fresh)
            result[~kept] = fresh
        return result


class PairSampler:
    """Exact independent draws of an int8-valued law with integer masses m_v (sum S), two
    values per 16 random bits: half the random bits and half the table lookups of
    TableSampler, for the low-entropy laws of small R.

    A pair (a, b) has probability P(a, b) = m_a m_b / S^2. The 2^16-entry guide gives pair
    (a, b) to c(a, b) = floor(2^16 P(a, b)) of its entries; the U entries left (< 2% of them
    for eps >= 0.5 at R <= 2) draw from the residual law with the exact integer weights
    m_a m_b 2^16 - c(a, b) S^2 (total U S^2). Together: c(a, b) / 2^16 + (U / 2^16) (P(a, b)
    - c(a, b) / 2^16) / (U / 2^16) = P(a, b), so the two values are independent with law m.
    The residual law is drawn the same way, by a second guide (16 more random bits), and
    what that leaves (< 0.1% of pairs) by binary search.
    """

    def __init__(self, masses: list[int], values: NDArray[np.integer[Any]]) -> None:
        codes = _pair_codes(np.asarray(values))
        self.sentinel = int(_pair_codes(np.array([np.iinfo(np.int8).min]))[0])
        weights = [a * b for a in masses for b in masses]
        self.guides: list[NDArray[np.int16]] = []
        for _ in range(2):
            guide, weights = self._split(weights, codes)
            self.guides.append(guide)
        # The last residual law: exact integer weights (up to ~2^160), their cumulative sums
        # in Python integers and, for the vectorized search, their top 62 bits.
        keep = [i for i, w in enumerate(weights) if w > 0]
        self.residual_codes = _read_only(codes[keep])
        self.residual_cdf = list(itertools.accumulate(weights[i] for i in keep))
        self.shift = max(0, self.residual_cdf[-1].bit_length() - 62) if keep else 0
        self.residual_top = _read_only(
            np.array([c >> self.shift for c in self.residual_cdf], dtype=np.int64)
        )

    def _split(
        self, weights: list[int], codes: NDArray[np.int16]
    ) -> tuple[NDArray[np.int16], list[int]]:
        """The guide of a law with integer weights (floor(2^16 w / total) entries each, the
        rest the sentinel) and the residual weights w 2^16 - entries total."""
        total = sum(weights)
        counts = [(w << 16) // total for w in weights]
        guide = np.repeat(codes, np.array(counts, dtype=np.int64))
        pad = np.full(GUIDE_BLOCKS - guide.size, self.sentinel, dtype=np.int16)
        residual = [(w << 16) - c * total for w, c in zip(weights, counts, strict=True)]
        return _read_only(np.concatenate((guide, pad))), residual

    def draw(self, rng: Rng, out: NDArray[np.integer[Any]]) -> None:
        """Fill the contiguous int8 array `out` with independent draws."""
        if not out.flags.c_contiguous or out.dtype != np.int8:
            raise ValueError("PairSampler.draw fills a contiguous int8 array")
        flat = out.reshape(-1)
        # Pairs are drawn into `out` itself when it holds whole aligned int16s.
        direct = flat.size % 2 == 0 and flat.ctypes.data % 2 == 0
        pairs = flat.view(np.int16) if direct else np.empty(-(-flat.size // 2), dtype=np.int16)
        first, second = self.guides
        self._look_up(rng, first, pairs)
        left = np.flatnonzero(pairs == self.sentinel)
        if left.size:
            drawn = np.empty(left.size, dtype=np.int16)
            self._look_up(rng, second, drawn)
            still = drawn == self.sentinel
            if still.any():
                drawn[still] = self._residual(rng, int(still.sum()))
            pairs[left] = drawn
        if not direct:
            # An odd count drops the last pair's second value: the first keeps its law.
            flat[:] = pairs.view(np.int8)[: flat.size]

    @staticmethod
    def _look_up(rng: Rng, guide: NDArray[np.int16], out: NDArray[np.int16]) -> None:
        words = rng.integers(0, 1 << 64, -(-out.size // 4), dtype=np.uint64)
        np.take(guide, words.view(np.uint16)[: out.size], out=out, mode="clip")

    def _residual(self, rng: Rng, count: int) -> NDArray[np.int16]:
        """Pairs from the residual law: u uniform on [0, total) is read from its top bits
        u_hi (uniform on [0, top total]); the cell is certain unless u_hi equals the top bits
        of a cell boundary (P ~ cells / 2^61), then the low bits decide, in exact integers."""
        u_hi = rng.integers(0, int(self.residual_top[-1]) + 1, count)
        cells = np.searchsorted(self.residual_top, u_hi, side="right")
        below = self.residual_top[np.maximum(cells - 1, 0)]
        result = self.residual_codes[np.minimum(cells, self.residual_codes.size - 1)]
        for i in np.flatnonzero((cells > 0) & (below == u_hi)):
            result[i] = self._exact(rng, int(u_hi[i]))
        return result

    def _exact(self, rng: Rng, u_hi: int) -> int:
        u = (u_hi << self.shift) + random_bits(rng, self.shift)
        if u >= self.residual_cdf[-1]:
            return int(self._residual(rng, 1)[0])  # past the total: drawn afresh
        return int(self.residual_codes[bisect.bisect_right(self.residual_cdf, u)])


def _pair_codes(values: NDArray[np.integer[Any]]) -> NDArray[np.int16]:
    """The int16 whose two bytes, in memory order, are the int8 values (a, b), for every
    pair of `values` (a major); one value gives the code of (v, v)."""
    pairs = np.stack(np.meshgrid(values, values, indexing="ij"), axis=-1).astype(np.int8)
    codes: NDArray[np.int16] = np.ascontiguousarray(pairs).view(np.int16).reshape(-1)
    return codes


def narrowest_int(values: NDArray[np.integer[Any]]) -> np.dtype[Any]:
    """int8, int16 or int32: the narrowest holding every value above its minimum (which
    TableSampler keeps as its sentinel)."""
    largest = int(np.abs(np.asarray(values, dtype=np.int64)).max())
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32) if largest <= np.iinfo(t).max)


def _read_only(array: NDArray[Any]) -> NDArray[Any]:
    array.flags.writeable = False
    return array


@functools.lru_cache(maxsize=32)
def grid_noise(epsilon: float, resolution: int) -> GridNoise:
    """The (cached, immutable) noise law for epsilon and resolution R."""
    return GridNoise(epsilon, resolution)


class HistogramEncoding(FrequencyOracle):
    """The histogram-encoding report, shared by SHE and THE (which differ only in how the
    aggregator counts support)."""

    #: Grid resolution R when the config leaves it out (the true item's coordinate is R,
    #: noise is in grid units). R = 1 makes the noise the geometric mechanism (Ghosh et al.,
    #: STOC 2009), whose SHE variance (8/eps^2)(x/sinh x)^2, x = eps/4R, is lowest at R = 1
    #: (28% below the paper's 8/eps^2 at eps = 4); its values fit int8 for eps >= 0.5 and
    #: < 0.1% of its draws leave the sampler's guide table. As R grows the law tends to the
    #: paper's Laplace (within 0.01% at R = 64).
    default_resolution: ClassVar[int] = 1

    #: Audit events: a 3x3 grid of (bucket of z at min(value, other), at max(value, other)),
    #: bucket 0: z <= 0, 1: 0 < z < R, 2: z >= R. The corners (2, 0) and (0, 2) carry the
    #: full privacy loss eps.
    audit_event_count = 9

    def __init__(self, *, epsilon: float, domain_size: int, resolution: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if resolution is None:
            resolution = self.default_resolution
        self.resolution = check_int(resolution, "resolution", 1, MAX_RESOLUTION)
        self.noise = grid_noise(self.requested_epsilon, self.resolution)
        self.fields = (Field("z", self.noise.report_dtype.str, self.domain_size),)

    @property
    def epsilon(self) -> float:
        return self.noise.epsilon

    def fixed_params(self) -> dict[str, Any]:
        return {"resolution": self.resolution}

    @property
    def clamp(self) -> int:
        """M: every reported value lies in [-M, M]."""
        return self.noise.clamp

    # -- client ----------------------------------------------------------------------------
    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        values = np.asarray(values, dtype=np.int64)
        if values.size and (values.min() < 0 or values.max() >= self.domain_size):
            raise ParameterError("values", f"must be in [0, {self.domain_size})")
        d, R = self.domain_size, self.resolution
        z = np.empty((values.size, d), dtype=self.noise.report_dtype)
        # The true item's coordinates: draws of their own law, which replace the x = 0 draws
        # there (independent of everything else, so the report's law is exact).
        true_coordinates = np.empty(values.size, dtype=self.noise.report_dtype)
        self.noise.sample_reported(rng, R, true_coordinates)
        rows = max(1, CHUNK_VALUES // d)
        for start in range(0, values.size, rows):
            chunk = values[start : start + rows]
            block = z[start : start + chunk.size]
            self.noise.sample_reported(rng, 0, block)
            block[np.arange(chunk.size), chunk] = true_coordinates[start : start + chunk.size]
        return {"z": z}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        rows = np.ascontiguousarray(batch["z"], dtype="<i4")
        return [{"z": base64.b64encode(row.tobytes()).decode("ascii")} for row in rows]

    def decode(self, reports: object) -> ReportBatch:
        items = check_reports(reports)
        size = 4 * self.domain_size
        chars = 4 * -(-size // 3)
        chunks: list[bytes] = []
        for i, report in enumerate(items):
            if not isinstance(report, dict):
                raise ReportError("report", "must be an object", i)
            text = report.get("z")
            if not isinstance(text, str):
                raise ReportError("z", "must be a base64 string", i)
            if len(text) != chars:
                raise ReportError(
                    "z", f"must be {chars} base64 characters ({self.domain_size} int32)", i
                )
            try:
                raw = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raise ReportError("z", "is not valid base64", i) from None
            if len(raw) != size:
                raise ReportError("z", f"must decode to {size} bytes ({self.domain_size} int32)", i)
            # One encoding per report: no non-zero padding bits (re-encoding must match).
            if base64.b64encode(raw).decode("ascii") != text:
                raise ReportError("z", "is not canonical base64 (non-zero padding bits)", i)
            chunks.append(raw)
        z = np.frombuffer(b"".join(chunks), dtype="<i4").reshape(len(items), self.domain_size)
        # An honest report never leaves [-M, M] (it is clamped there), so this rejects nothing
        # a real client sends and reveals nothing about anyone's value.
        outside = np.flatnonzero(((z < -self.clamp) | (z > self.clamp)).any(axis=1))
        if outside.size:
            raise ReportError(
                "z", f"values must be in [-{self.clamp}, {self.clamp}]", int(outside[0])
            )
        return {"z": z.astype(self.noise.report_dtype)}

    # -- privacy audit ---------------------------------------------------------------------
    def _buckets(self, z: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        z = np.asarray(z, dtype=np.int64)
        return (z > 0).astype(np.int64) + (z >= self.resolution)

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: (bucket of z at the smaller item of the pair, bucket at the larger one).
        z = batch["z"]
        low, high = min(value, other), max(value, other)
        return 3 * self._buckets(z[:, low]) + self._buckets(z[:, high])

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        # Under true input `value`: z_value ~ law(R), z_other ~ law(0), independently.
        def bucket_law(x: int) -> NDArray[np.float64]:
            buckets = self._buckets(self.noise.outputs)
            law = np.bincount(buckets, weights=self.noise.probabilities(x), minlength=3)
            return law.astype(np.float64)

        at_value, at_other = bucket_law(self.resolution), bucket_law(0)
        low, high = (at_value, at_other) if value < other else (at_other, at_value)
        probabilities: NDArray[np.float64] = np.outer(low, high).ravel()
        return probabilities
