"""`split` (Cormode, Kulkarni, Srivastava, SIGMOD 2018, splitting epsilon; multi-freq-ldpy's
SPL): every attribute is reported by its own oracle (k-RR or OUE by size, `inner_oracle`) at
epsilon / k, independently, in one report.

Each inner report gives a per-user indicator estimate of every value x of its attribute,
I(x) = (s(x) - q) / (p - q) with s(x) = 1 if the report supports x (k-RR: y = x; OUE: bit x
set), unbiased for 1[value = x], with variance v_in (true value x) or v_out (another value):
`set_variances` at one cell. A one-way cell is the sum of I(x) over the users; a two-way
cell (x, z) of attributes a, b is the sum of the products I_a(x) I_b(z), unbiased because the
two reports are independent. For a user, E[(I_a I_b)^2] = E[I_a^2] E[I_b^2] with
E[I^2] = v_in + 1 or v_out, so with f_xz, f_x, f_z the true frequencies of the cell and of
its one-way values, the cell's count has the exact variance
  n [f_xz ((v_in_a + 1)(v_in_b + 1) - 1) + (f_x - f_xz) (v_in_a + 1) v_out_b
     + (f_z - f_xz) v_out_a (v_in_b + 1) + (1 - f_x - f_z + f_xz) v_out_a v_out_b].
The sum of products needs, per pair, the counts of reports supporting both x and z: the
state holds, per attribute, its report count and support, then per pair (a < b) the
d_a x d_b co-support counts (row-major)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.multi.attributes import Attributes
from ldptel.client.multi.mechanisms import (
    Breakdown,
    Marginal,
    combine_variance,
    served_inner,
    served_list,
    set_variances,
)
from ldptel.client.oracles.base import PureOracle, ReportBatch, WireReport
from ldptel.client.oracles.unary import UnaryEncoding, unpack_bits
from ldptel.client.randomness import Rng

#: Indicator cells multiplied at a time when co-support counts are taken (bounds memory).
CHUNK_CELLS = 1 << 22


def indicators(oracle: PureOracle, batch: ReportBatch) -> NDArray[np.float64]:
    """The (n, d) 0/1 matrix of which values each report supports."""
    if isinstance(oracle, UnaryEncoding):
        return unpack_bits(batch["bits"], oracle.domain_size).astype(np.float64)
    y = np.asarray(batch["y"], dtype=np.int64)
    out = np.zeros((y.size, oracle.domain_size))
    out[np.arange(y.size), y] = 1.0
    return out


class SplitBreakdown(Breakdown):
    """Every attribute through its own inner oracle at epsilon / k; a report holds every
    attribute's inner report. One- and two-way marginals."""

    name = "split"

    def __init__(self, *, epsilon: float, attributes: Attributes, inner: object = None) -> None:
        super().__init__(epsilon=epsilon, attributes=attributes)
        share = self.requested_epsilon / len(attributes.names)
        served = served_list(inner, len(attributes.names))
        self.oracles = tuple(
            served_inner(share, size, own)
            for size, own in zip(attributes.sizes, served, strict=True)
        )

    @property
    def inners(self) -> tuple[PureOracle, ...]:
        return self.oracles

    @property
    def epsilon(self) -> float:
        """The attributes' reports are independent: their losses add."""
        return sum(oracle.epsilon for oracle in self.oracles)

    @property
    def state_size(self) -> int:
        sizes = self.attributes.sizes
        pairs = self.attributes.pairs
        return sum(1 + d for d in sizes) + sum(sizes[a] * sizes[b] for a, b in pairs)

    def estimable(self, which: tuple[int, ...]) -> bool:
        return 1 <= len(which) <= 2

    def state_of_batches(self, batches: Sequence[ReportBatch]) -> NDArray[np.int64]:
        """The window state of n reports given as each attribute's inner batch."""
        n = len(next(iter(batches[0].values())))
        sizes = self.attributes.sizes
        pairs = zip(self.oracles, batches, strict=True)
        parts = [np.concatenate(([n], oracle.support(batch))) for oracle, batch in pairs]
        cross = [np.zeros(sizes[a] * sizes[b]) for a, b in self.attributes.pairs]
        step = max(1, CHUNK_CELLS // max(sizes))
        for start in range(0, n, step):
            chunk = [{k: v[start : start + step] for k, v in b.items()} for b in batches]
            marks = [indicators(o, b) for o, b in zip(self.oracles, chunk, strict=True)]
            for j, (a, b) in enumerate(self.attributes.pairs):
                cross[j] += (marks[a].T @ marks[b]).reshape(-1)
        return np.concatenate([*parts, *cross]).astype(np.int64)

    def state_of_rows(self, rows: NDArray[np.integer[Any]], rng: Rng) -> NDArray[np.int64]:
        rows = np.asarray(rows, dtype=np.int64)
        return self.state_of_batches(
            [o.perturb_batch(rows[:, a], rng) for a, o in enumerate(self.oracles)]
        )

    def perturb_row(self, row: Sequence[int]) -> WireReport:
        report: WireReport = {}
        for name, oracle, value in zip(self.attributes.names, self.oracles, row, strict=True):
            report.update({f"{name}.{k}": v for k, v in oracle.perturb_one(int(value)).items()})
        return report

    def _cross(self, state: NDArray[np.int64], pair: int) -> NDArray[np.int64]:
        sizes = self.attributes.sizes
        start = sum(1 + d for d in sizes)
        for a, b in self.attributes.pairs[:pair]:
            start += sizes[a] * sizes[b]
        a, b = self.attributes.pairs[pair]
        return state[start : start + sizes[a] * sizes[b]].reshape(sizes[a], sizes[b])

    def marginal(self, state: NDArray[np.int64], which: Sequence[int]) -> Marginal:
        which = self._check(which)
        state = np.asarray(state, dtype=np.int64)
        parts = self._split(state[: sum(1 + d for d in self.attributes.sizes)])
        n = parts[0][0]
        shape = tuple(self.attributes.sizes[a] for a in which)
        if n == 0:
            nan = np.full(int(np.prod(shape)), np.nan)
            return Marginal(self._names(which), shape, n, nan, nan)
        ones = [o.estimate(s, m) for o, (m, s) in zip(self.oracles, parts, strict=True)]
        if len(which) == 1:
            (a,) = which
            f = np.clip(ones[a] / n, 0.0, 1.0)
            return Marginal(self._names(which), shape, n, ones[a], self._one_way(n, a, f))
        a, b = which
        estimate = self._two_way(state, parts, a, b).reshape(-1)
        f_ab = np.clip(estimate / n, 0.0, 1.0).reshape(shape)
        f_a, f_b = np.clip(ones[a] / n, 0.0, 1.0), np.clip(ones[b] / n, 0.0, 1.0)
        variance = self._pair_variance(n, a, b, f_ab, f_a, f_b)
        return Marginal(self._names(which), shape, n, estimate, variance)

    def _two_way(
        self, state: NDArray[np.int64], parts: list[tuple[int, NDArray[np.int64]]], a: int, b: int
    ) -> NDArray[np.float64]:
        """sum_u I_a(x) I_b(z) from the co-support counts and both supports."""
        (n, s_a), (_, s_b) = parts[a], parts[b]
        pa, qa = self.oracles[a].p_star, self.oracles[a].q_star
        pb, qb = self.oracles[b].p_star, self.oracles[b].q_star
        both = self._cross(state, self.attributes.pairs.index((a, b))).astype(np.float64)
        product = both - qb * s_a[:, None] - qa * s_b[None, :] + n * qa * qb
        return np.asarray(product / ((pa - qa) * (pb - qb)), dtype=np.float64)

    def _one_way(self, n: int, a: int, f: NDArray[np.float64]) -> NDArray[np.float64]:
        var_in, var_out = set_variances(self.oracles[a], 1)
        return combine_variance(n, [n], [var_in], [var_out], f)

    def _pair_variance(
        self,
        n: int,
        a: int,
        b: int,
        f_ab: NDArray[np.float64],
        f_a: NDArray[np.float64],
        f_b: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """The module docstring's variance for the (d_a, d_b) cells (clipped weights)."""
        in_a, out_a = set_variances(self.oracles[a], 1)
        in_b, out_b = set_variances(self.oracles[b], 1)
        only_a = np.clip(f_a[:, None] - f_ab, 0.0, 1.0)
        only_b = np.clip(f_b[None, :] - f_ab, 0.0, 1.0)
        neither = np.clip(1.0 - f_a[:, None] - f_b[None, :] + f_ab, 0.0, 1.0)
        per_user = (
            f_ab * ((in_a + 1) * (in_b + 1) - 1)
            + only_a * (in_a + 1) * out_b
            + only_b * out_a * (in_b + 1)
            + neither * out_a * out_b
        )
        return np.asarray(n * per_user, dtype=np.float64).reshape(-1)

    def exact_variance(
        self, n: int, which: Sequence[int], frequencies: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        which = self._check(which)
        f = np.asarray(frequencies, dtype=np.float64)
        if len(which) == 1:
            return self._one_way(n, which[0], f)
        a, b = which
        f_ab = f.reshape(self.attributes.sizes[a], self.attributes.sizes[b])
        return self._pair_variance(n, a, b, f_ab, f_ab.sum(axis=1), f_ab.sum(axis=0))
