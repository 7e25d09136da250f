"""`hadamard` (InpHT of Cormode, Kulkarni, Srivastava, SIGMOD 2018, Sec. 4-5, for categorical
attributes): marginals from the Hadamard (Walsh) coefficients of the joint distribution.

Attribute a's value is written in b_a = bitlength(d_a - 1) bits; a row's code x concatenates
them (attribute 0 highest). The coefficients the one- and two-way marginals need are the
nonzero masks alpha whose bits lie in the blocks of one or two attributes: T, |T| =
sum_a (2^b_a - 1) + sum_{a<b} (2^b_a - 1)(2^b_b - 1), in order (attributes' own masks, then
pairs lexicographically, masks ascending). A user draws j uniform in T, independently of the
row, and sends `{"coef": j, "bit": <alpha_j, x> mod 2}` through randomized response: kept with
p = e^eps / (1 + e^eps). With r = +1 for bit 0 and -1 for bit 1, E[r] = (2p - 1) chi_j(x).

A marginal over attributes A (m bits) has, for its cell z, the count
n_A(z) = 2^-m sum_{alpha in the masks of A's blocks} chi_alpha(z) sum_u chi_alpha(x_u), and
each user's X_u = 2^-m [1 + |T| 1[j_u in S] r_u chi_{j_u}(z) / (2p - 1)] (S the nonzero masks
of A's blocks, |S| = 2^m - 1) is unbiased for 1[x_u,A = z] (the coefficient's draw is part of
the estimate: scaled by |T|, not by the draws' count). Users are independent, and with
K = |T| (2^m - 1) / (2p - 1)^2 and sum_{alpha in S} chi_alpha(w) = 2^m 1[w = 0] - 1,
  Var X_u = 2^-2m (2^(m+1) - 1 + K) - 1 if x_u,A = z, 2^-2m (K - 1) if not,
so the cell count has variance n (f v_in + (1 - f) v_out), f the cell's true frequency.
The window state: per coefficient the number of reports, then per coefficient the number of
reports with bit 1."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.multi.attributes import Attributes
from ldptel.client.multi.mechanisms import Breakdown, Marginal, combine_variance, served_list
from ldptel.client.oracles.base import (
    SERVED_ABSOLUTE_SLACK,
    SERVED_RELATIVE_SLACK,
    PureOracle,
    WireReport,
    check_probability,
)
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_one,
    sample_bernoulli,
    sample_uniform_below,
    uniform_below_one,
)


def parity(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Popcount mod 2 of non-negative int64s."""
    bits = np.asarray(values, dtype=np.uint64).view(np.uint8).reshape(*np.shape(values), 8)
    return np.asarray(np.unpackbits(bits, axis=-1).sum(axis=-1) & 1, dtype=np.int64)


def walsh(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """sum_alpha v[alpha] (-1)^popcount(alpha & z) for every z (fast transform, 2^m long)."""
    out = np.array(values, dtype=np.float64)
    half = 1
    while half < out.size:
        blocks = out.reshape(-1, 2, half)
        low, high = blocks[:, 0, :].copy(), blocks[:, 1, :]
        blocks[:, 0, :] += high
        blocks[:, 1, :] = low - high
        half *= 2
    return out


class HadamardBreakdown(Breakdown):
    """One Hadamard coefficient of the row's code a user, its sign by randomized response."""

    name = "hadamard"

    def __init__(self, *, epsilon: float, attributes: Attributes, inner: object = None) -> None:
        """`inner`: as a created config serves it, `[{"oracle": "rr", "p": p}]`."""
        super().__init__(epsilon=epsilon, attributes=attributes)
        self.bits = tuple(max(1, (d - 1).bit_length()) for d in attributes.sizes)
        self.offsets = tuple(sum(self.bits[a + 1 :]) for a in range(len(self.bits)))
        self.p = self._served_p(served_list(inner, 1)[0])
        masks: list[int] = []
        for a in range(len(self.bits)):
            masks += [m << self.offsets[a] for m in range(1, 1 << self.bits[a])]
        for a, b in attributes.pairs:
            masks += [
                (ma << self.offsets[a]) | (mb << self.offsets[b])
                for ma in range(1, 1 << self.bits[a])
                for mb in range(1, 1 << self.bits[b])
            ]
        self.masks = np.array(masks, dtype=np.int64)
        self._position = {mask: j for j, mask in enumerate(masks)}

    def _served_p(self, served: object) -> float:
        """The keep probability served ({"oracle": "rr", "p": p}, 1/2 < p < 1, giving at most
        the requested epsilon) or derived (None; written with e^-eps so it cannot overflow)."""
        if served is None:
            return 1.0 / (1.0 + math.exp(-self.requested_epsilon))
        if (
            not isinstance(served, dict)
            or set(served) != {"oracle", "p"}
            or served["oracle"] != "rr"
        ):
            raise ParameterError("params.inner", 'must be [{"oracle": "rr", "p": p}]')
        p = check_probability(served["p"], "params.inner.p", 0.5, 1.0)
        allowed = self.requested_epsilon * (1 + SERVED_RELATIVE_SLACK) + SERVED_ABSOLUTE_SLACK
        if p in (0.5, 1.0) or not math.log(p / (1 - p)) <= allowed:
            raise ParameterError(
                "params.inner.p", f"gives more than epsilon {self.requested_epsilon!r}"
            )
        return float(p)

    def inner_params(self) -> list[dict[str, Any]]:
        return [{"oracle": "rr", "p": self.p}]

    @property
    def inners(self) -> tuple[PureOracle, ...]:
        return ()

    @property
    def inner_names(self) -> tuple[str, ...]:
        return ("rr",)

    @property
    def epsilon(self) -> float:
        """The bit's randomized response: p / (1 - p); the coefficient is drawn apart."""
        return math.log(self.p / (1 - self.p))

    @property
    def coefficients(self) -> int:
        return int(self.masks.size)

    @property
    def state_size(self) -> int:
        return 2 * self.coefficients

    def estimable(self, which: tuple[int, ...]) -> bool:
        return 1 <= len(which) <= 2

    def codes(self, rows: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Each row's code (the attributes' bit blocks, attribute 0 highest)."""
        rows = np.asarray(rows, dtype=np.int64)
        code = np.zeros(rows.shape[0], dtype=np.int64)
        for a, offset in enumerate(self.offsets):
            code |= rows[:, a] << offset
        return code

    def state_of_reports(
        self, coef: NDArray[np.integer[Any]], bit: NDArray[np.integer[Any]]
    ) -> NDArray[np.int64]:
        coef = np.asarray(coef, dtype=np.int64)
        counts = np.bincount(coef, minlength=self.coefficients)
        ones = np.bincount(coef, weights=np.asarray(bit, dtype=np.float64), minlength=counts.size)
        return np.concatenate((counts, ones)).astype(np.int64)

    def report_batch(
        self, rows: NDArray[np.integer[Any]], rng: Rng
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Each row's drawn coefficient and reported bit (the law of `perturb_row`)."""
        coef = sample_uniform_below(rng, self.coefficients, np.asarray(rows).shape[0])
        true = parity(self.masks[coef] & self.codes(rows))
        keep = sample_bernoulli(rng, self.p, coef.size)
        return coef, np.where(keep, true, 1 - true)

    def state_of_rows(self, rows: NDArray[np.integer[Any]], rng: Rng) -> NDArray[np.int64]:
        return self.state_of_reports(*self.report_batch(rows, rng))

    def perturb_row(self, row: Sequence[int]) -> WireReport:
        j = uniform_below_one(self.coefficients)
        code = int(self.codes(np.array([row], dtype=np.int64))[0])
        true = (int(self.masks[j]) & code).bit_count() & 1
        return {"coef": j, "bit": true if bernoulli_one(self.p) else 1 - true}

    def _local_masks(self, which: tuple[int, ...]) -> list[tuple[int, int]]:
        """(local mask over the marginal's m bits, coefficient index) for its nonzero masks;
        local: the marginal's attributes' blocks concatenated, the first highest."""
        widths = [self.bits[a] for a in which]
        result = []
        for local in range(1, 1 << sum(widths)):
            mask, rest = 0, local
            for a, width in zip(reversed(which), reversed(widths), strict=True):
                mask |= (rest & ((1 << width) - 1)) << self.offsets[a]
                rest >>= width
            result.append((local, self._position[mask]))
        return result

    def _cell_variances(self, which: tuple[int, ...]) -> tuple[float, float]:
        m = sum(self.bits[a] for a in which)
        k = self.coefficients * ((1 << m) - 1) / (2 * self.p - 1) ** 2
        return ((1 << (m + 1)) - 1 + k) / 4**m - 1, (k - 1) / 4**m

    def marginal(self, state: NDArray[np.int64], which: Sequence[int]) -> Marginal:
        which = self._check(which)
        state = np.asarray(state, dtype=np.int64)
        counts, ones = state[: self.coefficients], state[self.coefficients :]
        n = int(counts.sum())
        shape = tuple(self.attributes.sizes[a] for a in which)
        if n == 0:
            nan = np.full(math.prod(shape), np.nan)
            return Marginal(self._names(which), shape, n, nan, nan)
        weights = np.zeros(1 << sum(self.bits[a] for a in which))
        weights[0] = n
        scale = self.coefficients / (2 * self.p - 1)
        for local, j in self._local_masks(which):
            weights[local] = scale * (counts[j] - 2 * ones[j])
        padded = walsh(weights) / weights.size
        blocks = padded.reshape(tuple(1 << self.bits[a] for a in which))
        estimate = blocks[tuple(slice(0, d) for d in shape)].reshape(-1)
        var_in, var_out = self._cell_variances(which)
        f = np.clip(estimate / n, 0.0, 1.0)
        variance = combine_variance(n, [n], [var_in], [var_out], f)
        return Marginal(self._names(which), shape, n, estimate, variance)

    def exact_variance(
        self, n: int, which: Sequence[int], frequencies: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        var_in, var_out = self._cell_variances(self._check(which))
        return combine_variance(n, [n], [var_in], [var_out], frequencies)
