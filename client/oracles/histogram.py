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
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from ldptel.client.oracles.batch_decode import decode_base64_column
from ldptel.client.randomness import Rng
from ldptel.client.samplers import TableSampler

MAX_RESOLUTION = 4096
#: The table's weights add up to just under 2^61 (by < 2^-19): the sampler draws u from 61
#: uniform bits and rejects u >= total, which wastes a fraction < 2^-19 of the draws.
TOTAL_BITS = 61
#: The table ends where its weights fall below this (tail probability ~2^-38 at eps=1, R=64),
#: so the rounding of the tail weights stays small relative to the weights themselves.
MIN_TABLE_WEIGHT = 2**16
#: Largest clamp M (keeps the table at most ~4 MiB for tiny epsilon / R).
MAX_CLAMP = 2**18
#: Report values are drawn in chunks of about this many (cache-sized temporaries; measured
#: fastest among 2^16..2^20).
CHUNK_VALUES = 1 << 18


@dataclass(frozen=True)
class NoiseTable:
    """What defines the noise law exactly, served in a config as `noise` (docs/protocol.md,
    "Noise table"): the double a, the center weight W(0) and the clamp M; the table follows
    from them (and R) by integer arithmetic alone, and its total S is the served check sum."""

    a: float
    center: int
    clamp: int
    total: int

    def to_json(self) -> dict[str, Any]:
        # W(0) and S lie near 2^61, beyond a double's exact integers: decimal strings.
        center, total = str(self.center), str(self.total)
        return {"a": self.a, "center": center, "clamp": self.clamp, "total": total}

    @classmethod
    def from_json(cls, value: object, resolution: int) -> NoiseTable:
        """The table of an untrusted `noise` object; its weights are checked by GridNoise."""
        if not isinstance(value, dict) or set(value) != {"a", "center", "clamp", "total"}:
            raise ParameterError("noise", "must be an object of a, center, clamp and total")
        a = value["a"]
        if isinstance(a, bool) or not isinstance(a, float) or not 0.0 < a < 1.0:
            raise ParameterError("noise", "a must be a number in (0, 1)")
        return cls(
            a=a,
            center=_decimal(value["center"], "center"),
            clamp=check_int(value["clamp"], "noise", resolution + 1, MAX_CLAMP),
            total=_decimal(value["total"], "total"),
        )


def _decimal(text: object, name: str) -> int:
    """A positive integer below 2^TOTAL_BITS written as a decimal string."""
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text) or int(text) >> TOTAL_BITS:
        raise ParameterError("noise", f"{name} must be a decimal string of an integer < 2^61")
    return int(text)


_DECIMAL = re.compile(r"[1-9][0-9]{0,18}")


@functools.lru_cache(maxsize=32)
def derive_table(epsilon: float, resolution: int) -> NoiseTable:
    """The table for epsilon and R, as a campaign is created with it: a = e^(-eps/(2R)) one
    ulp up (so -ln(a) <= eps/(2R)), W(0) near 2^61 (1-a)/(1+a), and the clamp M where the
    weights W(j+1) = ceil(a W(j)) fall below MIN_TABLE_WEIGHT (at least R + 1, at most
    MAX_CLAMP)."""
    a = float(np.nextafter(math.exp(-epsilon / (2 * resolution)), 1.0))
    if not 0.0 < a < 1.0:
        raise ParameterError("epsilon", f"too small for resolution {resolution}")
    num, den = a.as_integer_ratio()
    # The weights sum to ~center (1+a)/(1-a) plus the ceilings' excess (<< 2^-20 of it).
    center = max(1, math.floor(2.0**TOTAL_BITS * (1 - 2.0**-20) * (1.0 - a) / (1.0 + a)))
    weight, clamp = center, 0
    while clamp <= resolution or (weight >= MIN_TABLE_WEIGHT and clamp < MAX_CLAMP):
        weight, clamp = -(-weight * num // den), clamp + 1
    half = _half_table(a, center, clamp, resolution)
    return NoiseTable(a, center, clamp, total=2 * sum(half) - center)


def _half_table(a: float, center: int, clamp: int, resolution: int) -> list[int]:
    """W(0), ..., W(L), L = M + R: W(j+1) = ceil(a W(j)) (so W(j) / W(j+1) <= 1/a), the last
    cell W(L) the geometric tail ceil(W(L-1) a / (1-a)); exact integer arithmetic on a's
    binary value. R cells beyond M so that x + noise covers [-M - R, M] for x in {0, R}."""
    num, den = a.as_integer_ratio()
    weights = [center]
    for _ in range(clamp + resolution - 1):
        weights.append(-(-weights[-1] * num // den))
    weights.append(-(-weights[-1] * num // (den - num)))
    return weights


class GridNoise:
    """The noise law of one report coordinate on the grid (exact integer weights), built
    from its NoiseTable.

    `weights[j + half_width]` is the weight of noise j in [-half_width, half_width] (the two
    end cells hold the tails); a coordinate with input x in {0, R} is reported as
    clamp(x + noise, -clamp, clamp), with clamp = half_width - R.
    """

    def __init__(self, resolution: int, table: NoiseTable) -> None:
        self.resolution = resolution
        self.table = table
        self.a = table.a
        half = _half_table(table.a, table.center, table.clamp, resolution)
        self.half_width = len(half) - 1
        self.clamp = table.clamp
        self.weights = _read_only(np.array(half[:0:-1] + half, dtype=np.int64))
        self.cdf = _read_only(np.cumsum(self.weights))
        self.total = int(self.cdf[-1])
        # An honest table's total lies in (2^60, 2^61): TableSampler's 61-bit draws.
        if self.total != table.total or self.total <= 1 << (TOTAL_BITS - 1):
            raise ParameterError("noise", "total is not the sum of the table's weights")
        self.masses = {x: self._output_masses(x) for x in (0, resolution)}
        self.outputs = np.arange(-self.clamp, self.clamp + 1, dtype=np.int64)
        self.moments = {x: self._moments(x) for x in (0, resolution)}
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

    # Exact in integers, then one correctly rounded division: the same float on every CPU (a
    # float dot product is BLAS's, whose kernels differ by CPU in the last bit, and `auto`
    # records these variances in the config its id hashes).
    def mean(self, x: int) -> float:
        return self.moments[x][0] / self.total

    def variance(self, x: int) -> float:
        # Var = E[z^2] - E[z]^2 = (S2 total - S1^2) / total^2, S_j = sum_k k^j m_k.
        first, second = self.moments[x]
        return (second * self.total - first * first) / (self.total * self.total)

    def _moments(self, x: int) -> tuple[int, int]:
        """(sum_k k m_k, sum_k k^2 m_k) over the integer masses of input x, as Python ints."""
        outputs, masses = self.outputs.tolist(), self.masses[x].tolist()
        first = sum(k * m for k, m in zip(outputs, masses, strict=True))
        return first, sum(k * k * m for k, m in zip(outputs, masses, strict=True))

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
        cells = np.arange(-self.half_width, self.half_width + 1)
        return TableSampler(self.cdf, cells.astype(narrowest_int(cells)))

    @functools.cached_property
    def _report_samplers(self) -> dict[int, TableSampler]:
        # clamp(x + noise) is monotone in the noise, so inverting the noise cdf and mapping
        # each cell j to clamp(x + j) draws the clamped coordinate from the same uniform.
        cells = np.arange(-self.half_width, self.half_width + 1)
        return {
            x: TableSampler(
                self.cdf, np.clip(cells + x, -self.clamp, self.clamp).astype(self.report_dtype)
            )
            for x in (0, self.resolution)
        }

    def sample(self, rng: Rng, shape: tuple[int, ...]) -> NDArray[np.integer[Any]]:
        """Noise in [-half_width, half_width] with P(j) = weights[j] / total, exactly."""
        out = np.empty(shape, dtype=self._noise_sampler.dtype)
        self._noise_sampler.sample(rng, out)
        return out

    def sample_reported(self, rng: Rng, x: int, out: NDArray[np.integer[Any]]) -> None:
        """Fill `out` (contiguous, of `report_dtype`) with independent draws of
        clamp(x + noise, -M, M), x in {0, R}: the law `probabilities(x)`, exactly."""
        self._report_samplers[x].sample(rng, out)


def narrowest_int(values: NDArray[np.integer[Any]]) -> np.dtype[Any]:
    """int8, int16 or int32: the narrowest holding every value above its minimum (which
    TableSampler keeps as its sentinel)."""
    largest = int(np.abs(np.asarray(values, dtype=np.int64)).max())
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32) if largest <= np.iinfo(t).max)


def _read_only(array: NDArray[Any]) -> NDArray[Any]:
    array.flags.writeable = False
    return array


@functools.lru_cache(maxsize=32)
def table_noise(resolution: int, table: NoiseTable) -> GridNoise:
    """The (cached, immutable) noise law of a table at resolution R."""
    return GridNoise(resolution, table)


def grid_noise(epsilon: float, resolution: int) -> GridNoise:
    """The noise law derived for epsilon and resolution R (`derive_table`)."""
    return table_noise(resolution, derive_table(epsilon, resolution))


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

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        resolution: int | None = None,
        noise: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if resolution is None:
            resolution = self.default_resolution
        self.resolution = check_int(resolution, "resolution", 1, MAX_RESOLUTION)
        if noise is None:
            table = derive_table(self.requested_epsilon, self.resolution)
        else:  # served by the config (derived_params), used as it is
            table = NoiseTable.from_json(noise, self.resolution)
        self.noise = table_noise(self.resolution, table)
        if noise is not None:
            self.check_served("noise")
        self.fields = (Field("z", self.noise.report_dtype.str, self.domain_size),)

    @property
    def epsilon(self) -> float:
        return self.noise.epsilon

    def fixed_params(self) -> dict[str, Any]:
        return {"resolution": self.resolution}

    def derived_params(self) -> dict[str, Any]:
        return {"noise": self.noise.table.to_json()}

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
        raw = decode_base64_column(items, "z", size)
        z = self._decode_each(items) if raw is None else raw.view("<i4")
        # An honest report never leaves [-M, M] (it is clamped there), so this rejects nothing
        # a real client sends and reveals nothing about anyone's value.
        outside = np.flatnonzero(((z < -self.clamp) | (z > self.clamp)).any(axis=1))
        if outside.size:
            raise ReportError(
                "z", f"values must be in [-{self.clamp}, {self.clamp}]", int(outside[0])
            )
        return {"z": z.astype(self.noise.report_dtype)}

    def _decode_each(self, items: Sequence[Any]) -> NDArray[np.int32]:
        """The per-report path: raises the error of the first malformed report."""
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
        return np.frombuffer(b"".join(chunks), dtype="<i4").reshape(len(items), self.domain_size)

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
