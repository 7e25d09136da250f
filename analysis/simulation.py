"""Simulated clients through an oracle's real code, and the planner built on its variance.

Simulation draws from a seeded numpy `Generator` (reproducible and fast); real clients use
the OS CSPRNG. Reports are perturbed in chunks whose size follows the oracle's report width,
so memory stays bounded for any n: support vectors of the chunks add.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.levels import SAMPLE, Combination, LevelPart, combine
from ldptel.client.oracles import FrequencyOracle, oracle_class
from ldptel.client.oracles.base import Field, check_epsilon, check_int

DISTRIBUTIONS = ("zipf", "uniform")
#: Bytes of one perturbed chunk; the oracle's own temporaries are a small multiple of it.
CHUNK_BYTES = 16 * 2**20
#: A wide report (SHE: up to 4 bytes per item, 64 MiB at d = 2^24) may fill a chunk alone, so
#: the floor is one row: a floor of 1,000 rows asked SHE at d = 10^7 for 37 GiB at once.
MIN_CHUNK_ROWS, MAX_CHUNK_ROWS = 1, 1_000_000

Progress = Callable[[int, int], None]


class HasFields(Protocol):
    """Anything whose reports are declared by `fields` (oracles, numeric mechanisms)."""

    @property
    def fields(self) -> tuple[Field, ...]: ...


def build_oracle(
    name: str, *, epsilon: float, domain_size: int, params: Mapping[str, Any] | None = None
) -> FrequencyOracle:
    """The oracle `name` with extra parameters (e.g. {"g": 5}); the oracles that hash labels
    label a domain given by its size "0", "1", ... themselves."""
    cls = oracle_class(name)
    params = dict(params or {})
    accepted = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    for key in params:
        if key in ("epsilon", "domain_size"):
            raise ParameterError("param", f"{key} has its own option, not --param")
        if key not in accepted and not takes_any:
            known = ", ".join(k for k in accepted if k not in ("epsilon", "domain_size"))
            raise ParameterError(
                "param", f"oracle {cls.name!r} has no parameter {key!r} (known: {known or '-'})"
            )
    return cls(epsilon=epsilon, domain_size=domain_size, **params)


def item_probabilities(
    domain_size: int, distribution: str = "zipf", zipf_exponent: float = 1.1
) -> NDArray[np.float64]:
    """Item i's probability: proportional to 1/(i+1)^s for zipf, 1/d for uniform."""
    if distribution not in DISTRIBUTIONS:
        raise ParameterError("distribution", f"must be one of {', '.join(DISTRIBUTIONS)}")
    if distribution == "uniform":
        return np.full(domain_size, 1.0 / domain_size)
    if not math.isfinite(zipf_exponent) or zipf_exponent < 0:
        raise ParameterError("zipf_exponent", f"must be finite and >= 0, got {zipf_exponent!r}")
    weights = 1.0 / np.arange(1, domain_size + 1, dtype=np.float64) ** zipf_exponent
    probabilities: NDArray[np.float64] = weights / weights.sum()
    return probabilities


def true_counts(
    n: int,
    domain_size: int,
    rng: np.random.Generator,
    distribution: str = "zipf",
    zipf_exponent: float = 1.1,
) -> NDArray[np.int64]:
    """How many of n simulated clients hold each item (a multinomial draw)."""
    n = check_int(n, "n", 1)
    probabilities = item_probabilities(domain_size, distribution, zipf_exponent)
    return rng.multinomial(n, probabilities).astype(np.int64)


def chunk_rows(oracle: HasFields, budget_bytes: int = CHUNK_BYTES) -> int:
    """Reports per perturbed chunk so that one chunk's batch takes about `budget_bytes`."""
    per_report = max(1, sum(f.nbytes(1) for f in oracle.fields))
    return int(np.clip(budget_bytes // per_report, MIN_CHUNK_ROWS, MAX_CHUNK_ROWS))


def simulate_support(
    oracle: FrequencyOracle,
    counts: NDArray[np.int64],
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> NDArray[np.int64]:
    """The support vector of sum(counts) reports, counts[v] of them with true value v."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    edges = np.cumsum(counts)
    rows = chunk_rows(oracle)
    support = np.zeros(oracle.support_size, dtype=np.int64)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        # Client i (in value order) holds the value whose cumulative count first exceeds i.
        values = np.searchsorted(edges, np.arange(start, stop), side="right")
        support += oracle.support(oracle.perturb_batch(values, rng))
        if progress is not None:
            progress(stop, n)
    return support


@dataclass(frozen=True)
class Simulation:
    """Per item: true count, estimated count, exact variance (with the true f_v term)."""

    counts: NDArray[np.int64]
    estimate: NDArray[np.float64]
    variance: NDArray[np.float64]
    #: The summed support vector the estimate came from (None for a combination of levels).
    support: NDArray[np.int64] | None = None

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def stderr(self) -> NDArray[np.float64]:
        return np.sqrt(self.variance)


def simulate(
    oracle: FrequencyOracle,
    counts: NDArray[np.int64],
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> Simulation:
    """Perturb, count and estimate the given true counts through the oracle's own code."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    support = simulate_support(oracle, counts, rng, progress)
    return Simulation(
        counts=counts,
        estimate=oracle.estimate(support, n),
        variance=oracle.variance(n, counts / n),
        support=support,
    )


@dataclass(frozen=True)
class Plan:
    """Users needed so an item's estimated frequency has standard error <= target_stderr."""

    oracle: str
    epsilon: float
    domain_size: int
    target_stderr: float
    #: Per-report variance of an estimated count: the worst item over f_v in [0, 1], and
    #: a rare item (f_v = 0, the figure papers quote).
    variance_worst: float
    variance_rare: float

    @property
    def users(self) -> int:
        """Enough users for every item, whatever its frequency."""
        return _users(self.variance_worst, self.target_stderr)

    @property
    def users_rare(self) -> int:
        """Enough users for rare items (f_v near 0)."""
        return _users(self.variance_rare, self.target_stderr)


def _users(per_report_variance: float, target_stderr: float) -> int:
    # Var[count] = n * v, so the frequency's stderr is sqrt(n v) / n = sqrt(v / n) <= X
    # exactly when n >= v / X^2.
    return max(1, math.ceil(per_report_variance / target_stderr**2))


def plan(oracle: FrequencyOracle, target_stderr: float) -> Plan:
    """The planner: users needed for a target frequency stderr, from the exact variance."""
    target = check_epsilon(target_stderr, "target_stderr")
    d = oracle.domain_size
    # The variance is linear in f_v, so its maximum over f_v in [0, 1] is at an end.
    worst = max(float(np.max(oracle.variance(1, np.full(d, f)))) for f in (0.0, 1.0))
    return Plan(
        oracle=oracle.name,
        epsilon=oracle.epsilon,
        domain_size=d,
        target_stderr=target,
        variance_worst=worst,
        variance_rare=float(np.max(oracle.variance(1, np.zeros(d)))),
    )


# -- personalized privacy (ldptel.client.levels) -----------------------------------------


def split_users(n: int, fractions: Mapping[str, float]) -> dict[str, int]:
    """n users split by level fractions (summing to 1), by largest remainder so the parts
    sum to n exactly."""
    n = check_int(n, "n", 0)
    exact = {level: n * fraction for level, fraction in fractions.items()}
    parts = {level: math.floor(share) for level, share in exact.items()}
    by_remainder = sorted(exact, key=lambda level: parts[level] - exact[level])
    for level in by_remainder[: n - sum(parts.values())]:
        parts[level] += 1
    return parts


@dataclass(frozen=True)
class LevelSimulation:
    """True counts per level, and the combination of the reporting levels' estimates."""

    counts: dict[str, NDArray[np.int64]]
    combination: Combination

    @property
    def reporting_counts(self) -> NDArray[np.int64]:
        """True counts of the users whose level reports (what the estimate estimates)."""
        total = np.zeros_like(next(iter(self.counts.values())))
        for part in self.combination.parts:
            total += self.counts[part.level]
        return total


def simulate_levels(
    config: CampaignConfig, counts: Mapping[str, NDArray[np.int64]], rng: np.random.Generator
) -> LevelSimulation:
    """counts[level][v] users of each level holding v, each reporting as the config's level
    rule says (`CampaignConfig.level_oracle`), estimated and combined as the aggregator does."""
    parts = []
    for level, level_counts in counts.items():
        oracle = config.level_oracle(level)
        n = int(np.sum(level_counts))
        if oracle is None or n == 0:  # a level that does not report, or has no users
            continue
        support = simulate_support(oracle, level_counts, rng)
        parts.append(LevelPart(level, oracle, n, oracle.estimate(support, n)))
    return LevelSimulation(dict(counts), combine(parts))


@dataclass(frozen=True)
class StrategyPlan:
    """A level strategy's cost for a mix of levels, from the exact (f_v = 0) variances."""

    strategy: str
    threshold: float | None
    #: The epsilon each level reports with (None: does not report).
    epsilons: dict[str, float | None]
    reporting_fraction: float
    #: N * Var(estimated frequency) of the worst item for N users: stderr = sqrt(v / N).
    variance_per_user: float

    def stderr(self, n: int) -> float:
        """Standard error of an item's estimated frequency with n users (all levels)."""
        return math.sqrt(self.variance_per_user / n)

    def users(self, target_stderr: float) -> int:
        """Users (all levels) needed for a frequency stderr <= target_stderr."""
        return _users(self.variance_per_user, target_stderr)


def plan_levels(config: CampaignConfig, fractions: Mapping[str, float]) -> list[StrategyPlan]:
    """Every level strategy for a config's levels and their fractions of users: optimal,
    minimum, and threshold and sample at each level epsilon above the smallest (other
    thresholds are dominated). With N users, n_l = N pi_l and the combination's Var(f^) =
    1 / sum_l (n_l / V_l) (ldptel.client.levels.combine), V_l the per-report variance."""
    smallest = min(config.levels.values())
    above = [t for t in sorted(set(config.levels.values())) if t > smallest]
    choices: list[tuple[str, float | None]] = [("optimal", None), ("minimum", None)]
    choices += [("threshold", t) for t in above] + [(SAMPLE, t) for t in above]
    plans = []
    for strategy, threshold in choices:
        variant = replace(config, level_strategy=strategy, level_threshold=threshold)
        precision = np.zeros(config.domain_size)
        epsilons: dict[str, float | None] = {}
        for level, fraction in fractions.items():
            oracle = variant.level_oracle(level)
            epsilons[level] = None if oracle is None else oracle.epsilon
            if oracle is not None:
                precision += fraction / oracle.variance(1, None)
        plans.append(
            StrategyPlan(
                strategy=strategy,
                threshold=threshold,
                epsilons=epsilons,
                reporting_fraction=sum(
                    f for level, f in fractions.items() if epsilons[level] is not None
                ),
                variance_per_user=float(np.max(1.0 / precision)),
            )
        )
    return plans
