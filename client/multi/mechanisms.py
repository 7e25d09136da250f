"""The breakdown mechanisms: how one user's row (a value of every attribute) becomes one
report under the campaign's epsilon, and how the window's reports give every one-way and
two-way marginal, each cell unbiased with its exact variance.

- `joint` (Cormode, Kulkarni, Srivastava, SIGMOD 2018, "InpRR"/"InpOUE"): one frequency
  oracle (k-RR or OUE) over the joint domain; a marginal cell is the sum of its joint cells.
- `pairs` (the same paper's marginal sampling, "Marg*": each user samples one marginal and
  reports only it at full epsilon; as multi-freq-ldpy's SMP samples one attribute): each user
  draws one pair of attributes uniformly and reports its cell in the pair's domain.

Both are estimated through one formula. A marginal cell is a set S of cells of an inner
oracle's domain; a user in a group of n_j reports whose true value is in S contributes
variance v_in, one outside v_out (`set_variances`). With the groups' true counts m_j of S
and M = sum n_j reports used, the estimate n/M sum_j c~_j(S) is unbiased given the group sizes
(the groups are a uniform random partition), with variance
  (n/M)^2 [sum_j n_j (f v_in_j + (1 - f) v_out_j) + M f (1 - f) (n - M)/(n - 1)],
f = n_S/n the cell's true frequency; the last term is the hypergeometric variance of sum m_j
(zero for `joint`, where M = n)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.multi.attributes import Attributes
from ldptel.client.oracles.base import PureOracle, WireReport, check_report_epsilon
from ldptel.client.oracles.de import DirectEncoding
from ldptel.client.oracles.oue import OptimizedUnaryEncoding
from ldptel.client.oracles.unary import UnaryEncoding
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below, uniform_below_one

Z95 = 1.959963984540054


def inner_oracle(epsilon: float, domain_size: int) -> PureOracle:
    """k-RR below d = 3 e^eps + 2, else OUE: the smaller variance of the two (Wang et al.,
    USENIX Security 2017, Sec. 4.4: k-RR's variance exceeds OUE's from there on)."""
    if domain_size < 3 * math.exp(epsilon) + 2:
        return DirectEncoding(epsilon=epsilon, domain_size=domain_size)
    return OptimizedUnaryEncoding(epsilon=epsilon, domain_size=domain_size)


#: The inner oracles a breakdown uses, by the name a config serves them under.
INNER_ORACLES: dict[str, type[PureOracle]] = {
    DirectEncoding.name: DirectEncoding,
    OptimizedUnaryEncoding.name: OptimizedUnaryEncoding,
}


def served_inner(epsilon: float, domain_size: int, served: object) -> PureOracle:
    """The inner oracle a config serves ({"oracle": "de", "p": ..., "q": ...}: built and
    checked against epsilon by the oracle itself), or `inner_oracle`'s for a config not yet
    created (None)."""
    if served is None:
        return inner_oracle(epsilon, domain_size)
    if not isinstance(served, dict) or served.get("oracle") not in INNER_ORACLES:
        raise ParameterError(
            "params.inner", f"each must be an object with oracle in {list(INNER_ORACLES)}"
        )
    params = {k: v for k, v in served.items() if k != "oracle"}
    try:
        return INNER_ORACLES[served["oracle"]](epsilon=epsilon, domain_size=domain_size, **params)
    except TypeError as error:
        raise ParameterError("params.inner", str(error)) from error


def served_list(inner: object, count: int) -> list[object]:
    """A config's `params.inner` (one entry per inner oracle), or None each if not given."""
    if inner is None:
        return [None] * count
    if not isinstance(inner, list) or len(inner) != count:
        raise ParameterError("params.inner", f"must be a list of {count} inner oracles")
    return list(inner)


def set_variances(oracle: PureOracle, size: int) -> tuple[float, float]:
    """Per-report variance of the estimated count of a set of `size` items, for a report
    whose true item is in the set (v_in) and one whose item is not (v_out)."""
    p, q = oracle.p_star, oracle.q_star
    scale = (p - q) ** 2
    if isinstance(oracle, UnaryEncoding):  # independent bits: the set's bits' variances add
        return (p * (1 - p) + (size - 1) * q * (1 - q)) / scale, size * q * (1 - q) / scale
    # k-RR: the report is in the set with p + (size-1) q (true item in it) or size q.
    inside, outside = p + (size - 1) * q, size * q
    return inside * (1 - inside) / scale, outside * (1 - outside) / scale


@dataclass(frozen=True)
class Group:
    """The reports of one inner oracle used by a marginal: how many, the estimated count of
    each marginal cell among them (flattened, row-major), and v_in, v_out of its sets."""

    n: float  # reports (for exact_variance: the expected share of n)
    estimate: NDArray[np.float64]
    var_in: float
    var_out: float


@dataclass(frozen=True)
class Marginal:
    """A marginal over `attributes` (in campaign order): estimated counts of its cells
    (row-major over `shape`), unbiased, with their variance at the estimated frequencies."""

    attributes: tuple[str, ...]
    shape: tuple[int, ...]
    n: int
    estimate: NDArray[np.float64]
    variance: NDArray[np.float64]

    @property
    def stderr(self) -> NDArray[np.float64]:
        return np.sqrt(self.variance)

    @property
    def ci95(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self.estimate - Z95 * self.stderr, self.estimate + Z95 * self.stderr


def combine_variance(
    n: int, sizes: Sequence[float], var_in: Sequence[float], var_out: Sequence[float], f: Any
) -> NDArray[np.float64]:
    """The module docstring's variance, for cells of true frequency f."""
    f = np.asarray(f, dtype=np.float64)
    used = float(sum(sizes))
    ldp = sum(m * (f * vi + (1 - f) * vo) for m, vi, vo in zip(sizes, var_in, var_out, strict=True))
    sampling = used * f * (1 - f) * (n - used) / (n - 1) if n > 1 else 0.0 * f
    return np.asarray((n / used) ** 2 * (ldp + sampling), dtype=np.float64)


class Breakdown(ABC):
    """A breakdown mechanism over `attributes` at `epsilon` (one report per user)."""

    name: ClassVar[str]

    def __init__(self, *, epsilon: float, attributes: Attributes, inner: object = None) -> None:
        """`inner`: the inner oracles' parameters as a created config serves them
        (`inner_params`), so that no client derives one; None derives them."""
        self.requested_epsilon = check_report_epsilon(epsilon)
        self.attributes = attributes

    def inner_params(self) -> list[dict[str, Any]]:
        """Each inner oracle's name and parameters (what a created config serves)."""
        return [{"oracle": o.name, **o.derived_params()} for o in self.inners]

    @property
    @abstractmethod
    def inners(self) -> tuple[PureOracle, ...]:
        """The inner oracles, in state order."""

    @property
    def inner_names(self) -> tuple[str, ...]:
        """The inner oracles' names (sorted, distinct), as `auto` and `simulate` print them."""
        return tuple(sorted({oracle.name for oracle in self.inners}))

    @property
    def epsilon(self) -> float:
        """One report's guarantee: the largest inner oracle's (a report is one inner
        oracle's report, and for `pairs` also the pair, drawn independently of the row)."""
        return max(oracle.epsilon for oracle in self.inners)

    @property
    def state_size(self) -> int:
        return sum(1 + oracle.domain_size for oracle in self.inners)

    def _split(self, state: NDArray[np.int64]) -> list[tuple[int, NDArray[np.int64]]]:
        """The state as (reports, support) per inner oracle."""
        parts, start = [], 0
        for oracle in self.inners:
            end = start + 1 + oracle.domain_size
            parts.append((int(state[start]), state[start + 1 : end]))
            start = end
        return parts

    def _pack(self, parts: list[tuple[int, NDArray[np.int64]]]) -> NDArray[np.int64]:
        return np.concatenate([np.concatenate(([n], s)) for n, s in parts]).astype(np.int64)

    @abstractmethod
    def state_of_rows(self, rows: NDArray[np.integer[Any]], rng: Rng) -> NDArray[np.int64]:
        """Randomize each row (n x k value indices) and return the additive window state."""

    @abstractmethod
    def perturb_row(self, row: Sequence[int]) -> WireReport:
        """One user's report from the OS CSPRNG (the SDK's path)."""

    def estimable(self, which: tuple[int, ...]) -> bool:
        return 1 <= len(which) <= len(self.attributes.names)

    @abstractmethod
    def marginal(self, state: NDArray[np.int64], which: Sequence[int]) -> Marginal:
        """Marginal over attribute positions `which` (sorted), from a window's state."""

    @abstractmethod
    def exact_variance(
        self, n: int, which: Sequence[int], frequencies: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Exact variance of marginal `which`'s cells (row-major) for n users whose rows
        have the marginal's true cell frequencies `frequencies`."""

    def _check(self, which: Sequence[int]) -> tuple[int, ...]:
        which = tuple(int(a) for a in which)
        if list(which) != sorted(set(which)) or not self.estimable(which):
            raise ParameterError("attributes", f"{self.name} does not estimate {which}")
        return which

    def _names(self, which: tuple[int, ...]) -> tuple[str, ...]:
        return tuple(self.attributes.names[a] for a in which)


class GroupedBreakdown(Breakdown):
    """A mechanism whose marginal cell is a set of inner cells estimated by groups of
    reports (`joint`, `pairs`: the module docstring's estimate and variance)."""

    @abstractmethod
    def groups(
        self, which: tuple[int, ...], parts: list[tuple[int, NDArray[np.int64]]] | None
    ) -> list[Group]:
        """The groups estimating marginal `which` (None: sizes only, estimates empty)."""

    def marginal(self, state: NDArray[np.int64], which: Sequence[int]) -> Marginal:
        """Marginal over attribute positions `which` (sorted), from a window's state."""
        which = self._check(which)
        parts = self._split(np.asarray(state, dtype=np.int64))
        n = sum(m for m, _ in parts)
        groups = [g for g in self.groups(which, parts) if g.n > 0]
        shape = tuple(self.attributes.sizes[a] for a in which)
        if not groups or n == 0:
            nan = np.full(math.prod(shape), np.nan)
            return Marginal(self._names(which), shape, n, nan, nan)
        used = sum(g.n for g in groups)
        estimate = n / used * np.sum([g.estimate for g in groups], axis=0)
        f = np.clip(estimate / n, 0.0, 1.0)
        variance = combine_variance(
            n, [g.n for g in groups], [g.var_in for g in groups], [g.var_out for g in groups], f
        )
        return Marginal(self._names(which), shape, n, estimate, variance)

    def exact_variance(
        self, n: int, which: Sequence[int], frequencies: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """At the groups' expected sizes (n / pairs for `pairs`)."""
        groups = self.groups(self._check(which), None)
        return combine_variance(
            n,
            [g.n * n for g in groups],
            [g.var_in for g in groups],
            [g.var_out for g in groups],
            frequencies,
        )

    def _sum_cells(
        self, cells: NDArray[np.float64], dims: tuple[int, ...], keep: tuple[int, ...]
    ) -> NDArray[np.float64]:
        """Cells over attributes `dims` (row-major) summed down to `keep` (a subset)."""
        shape = tuple(self.attributes.sizes[a] for a in dims)
        axes = tuple(i for i, a in enumerate(dims) if a not in keep)
        return np.asarray(cells.reshape(shape).sum(axis=axes), dtype=np.float64).reshape(-1)

    def _set_size(self, dims: tuple[int, ...], keep: tuple[int, ...]) -> int:
        return math.prod(self.attributes.sizes[a] for a in dims if a not in keep)


class JointBreakdown(GroupedBreakdown):
    """One oracle over the joint domain (row-major index of the row)."""

    name = "joint"

    def __init__(self, *, epsilon: float, attributes: Attributes, inner: object = None) -> None:
        super().__init__(epsilon=epsilon, attributes=attributes)
        [served] = served_list(inner, 1)
        self.oracle = served_inner(self.requested_epsilon, attributes.joint_size, served)

    @property
    def inners(self) -> tuple[PureOracle, ...]:
        return (self.oracle,)

    def state_of_rows(self, rows: NDArray[np.integer[Any]], rng: Rng) -> NDArray[np.int64]:
        values = self.attributes.joint_index(rows)
        support = self.oracle.support(self.oracle.perturb_batch(values, rng))
        return self._pack([(values.size, support)])

    def perturb_row(self, row: Sequence[int]) -> WireReport:
        return self.oracle.perturb_one(int(self.attributes.joint_index(np.array([row]))[0]))

    def groups(
        self, which: tuple[int, ...], parts: list[tuple[int, NDArray[np.int64]]] | None
    ) -> list[Group]:
        dims = tuple(range(len(self.attributes.names)))
        var_in, var_out = set_variances(self.oracle, self._set_size(dims, which))
        if parts is None:
            return [Group(1, np.empty(0), var_in, var_out)]
        n, support = parts[0]
        cells = self.oracle.estimate(support, n)
        return [Group(n, self._sum_cells(cells, dims, which), var_in, var_out)]


class PairsBreakdown(GroupedBreakdown):
    """Each user draws one of the C(k, 2) attribute pairs uniformly (independently of the
    row) and reports `{"pair": j, ...}`: pair j's cell through its inner oracle at full
    epsilon. One- and two-way marginals only."""

    name = "pairs"

    def __init__(self, *, epsilon: float, attributes: Attributes, inner: object = None) -> None:
        super().__init__(epsilon=epsilon, attributes=attributes)
        sizes, pairs = attributes.sizes, attributes.pairs
        served = served_list(inner, len(pairs))
        self.oracles = tuple(
            served_inner(self.requested_epsilon, sizes[a] * sizes[b], own)
            for (a, b), own in zip(pairs, served, strict=True)
        )

    @property
    def inners(self) -> tuple[PureOracle, ...]:
        return self.oracles

    def estimable(self, which: tuple[int, ...]) -> bool:
        return 1 <= len(which) <= 2

    def _cells(self, rows: NDArray[np.int64], pair: int) -> NDArray[np.int64]:
        a, b = self.attributes.pairs[pair]
        return rows[:, a] * self.attributes.sizes[b] + rows[:, b]

    def state_of_rows(self, rows: NDArray[np.integer[Any]], rng: Rng) -> NDArray[np.int64]:
        rows = np.asarray(rows, dtype=np.int64)
        chosen = sample_uniform_below(rng, len(self.oracles), rows.shape[0])
        parts = []
        for j, oracle in enumerate(self.oracles):
            mine = rows[chosen == j]
            support = oracle.support(oracle.perturb_batch(self._cells(mine, j), rng))
            parts.append((mine.shape[0], support))
        return self._pack(parts)

    def perturb_row(self, row: Sequence[int]) -> WireReport:
        j = uniform_below_one(len(self.oracles))
        cell = int(self._cells(np.array([row], dtype=np.int64), j)[0])
        return {"pair": j, **self.oracles[j].perturb_one(cell)}

    def groups(
        self, which: tuple[int, ...], parts: list[tuple[int, NDArray[np.int64]]] | None
    ) -> list[Group]:
        result = []
        share = 1 / len(self.oracles)
        for j, pair in enumerate(self.attributes.pairs):
            if not set(which) <= set(pair):
                continue
            var_in, var_out = set_variances(self.oracles[j], self._set_size(pair, which))
            if parts is None:
                result.append(Group(share, np.empty(0), var_in, var_out))
                continue
            n, support = parts[j]
            cells = self.oracles[j].estimate(support, n)
            result.append(Group(n, self._sum_cells(cells, pair, which), var_in, var_out))
        return result
