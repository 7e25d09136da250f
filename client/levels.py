"""Personalized privacy in the local model ("Conservative or Liberal? Personalized
Differential Privacy", Jorgensen, Cormode, Yu, ICDE 2015).

A campaign declares named privacy levels, each with an epsilon; every user (through the app)
picks one, and the level travels with the user's reports (it is public by design, as in the
paper: the privacy specification is chosen per user, not per value). Three strategies decide
which epsilon a level's reports are randomized with:

- ``optimal``: each level's own epsilon; the aggregator combines the per-level unbiased
  estimates with inverse-variance weights (`combine`);
- ``minimum``: every level uses the smallest epsilon (the paper's Minimum baseline);
- ``threshold``: levels whose epsilon is below t do not report, the rest use t (Threshold).

`reporting_epsilon` is that rule: the client SDK and the simulation both call it.

A fourth strategy, ``sample`` (the local counterpart of the paper's Sample mechanism,
`SampleOracle`), is simulated and benchmarked but not offered to campaigns: the optimal
combination beats it at every level mix (docs/personalized-privacy.md, "Sample").
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import InvalidLevelError, ParameterError
from ldptel.client.oracles.base import FrequencyOracle, ReportBatch, WireReport, check_epsilon
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_bernoulli, sample_uniform_below

#: Used with fullmatch: "$" would also accept a trailing newline.
LEVEL_NAME = re.compile(r"[a-z0-9_-]{1,32}")
MAX_LEVELS = 16
#: The strategies a campaign may declare.
STRATEGIES = ("optimal", "minimum", "threshold")
#: The Sample mechanism: simulated and benchmarked only (see the module docstring).
SAMPLE = "sample"
SIMULATED_STRATEGIES = (*STRATEGIES, SAMPLE)

Vector = NDArray[np.float64]


def check_levels(levels: object) -> dict[str, float]:
    """An untrusted {level name: epsilon} object: at most MAX_LEVELS names of
    [a-z0-9_-]{1,32}, each epsilon finite and > 0. Empty means no levels."""
    if not isinstance(levels, dict):
        raise ParameterError("levels", "must be an object of level name -> epsilon")
    if len(levels) > MAX_LEVELS:
        raise ParameterError("levels", f"at most {MAX_LEVELS} levels, got {len(levels)}")
    checked: dict[str, float] = {}
    for name, epsilon in levels.items():
        if not isinstance(name, str) or not LEVEL_NAME.fullmatch(name):
            raise ParameterError("levels", f"level names must match [a-z0-9_-]{{1,32}}: {name!r}")
        checked[name] = check_epsilon(epsilon, f"levels.{name}")
    return checked


def check_strategy(
    strategy: object, threshold: object, levels: Mapping[str, float]
) -> tuple[str, float | None]:
    """The validated (level_strategy, level_threshold) pair for `levels`."""
    if strategy not in STRATEGIES:
        raise ParameterError("level_strategy", f"must be one of {', '.join(STRATEGIES)}")
    assert isinstance(strategy, str)
    if not levels and (strategy != "optimal" or threshold is not None):
        raise ParameterError("level_strategy", "needs privacy levels (the levels field)")
    if strategy != "threshold":
        if threshold is not None:
            raise ParameterError("level_threshold", "is used only by level_strategy threshold")
        return strategy, None
    if threshold is None:
        raise ParameterError("level_threshold", "is required by level_strategy threshold")
    t = check_epsilon(threshold, "level_threshold")
    if t > max(levels.values()):
        raise ParameterError("level_threshold", "is above every level's epsilon: nobody reports")
    return strategy, t


def reporting_epsilon(
    levels: Mapping[str, float], level: str, strategy: str, threshold: float | None
) -> float | None:
    """The epsilon a user at `level` randomizes with under `strategy`; None: does not report.

    Every choice is at most the level's own epsilon, so each user gets at least the privacy
    asked for (Jorgensen et al. 2015, Sec. III: Minimum and Threshold)."""
    if level not in levels:
        known = ", ".join(sorted(levels)) or "none (send no level)"
        raise InvalidLevelError("unknown", f"{level!r} is not a privacy level (known: {known})")
    own = levels[level]
    if strategy == "minimum":
        return min(levels.values())
    if strategy == "threshold":
        assert threshold is not None
        return threshold if own >= threshold else None
    if strategy == SAMPLE:  # the guarantee of a SampleOracle report below t
        assert threshold is not None
        return min(own, threshold)
    return own


def sample_probability(epsilon: float, threshold: float) -> float:
    """pi = (e^eps - 1) / (e^t - 1): the largest probability of a true t-LDP report that keeps
    a SampleOracle report eps-LDP (1 when eps >= t). The paper's sampling probability
    (Jorgensen et al. 2015, Sec. IV), here from the local argument in SampleOracle."""
    if epsilon >= threshold:
        return 1.0
    return math.expm1(epsilon) / math.expm1(threshold)


class SampleOracle(FrequencyOracle):
    """The Sample mechanism in the local model, for a user at epsilon < t: with probability
    pi = (e^eps - 1)/(e^t - 1) the t-LDP oracle's report of the true value, otherwise its
    report of a uniformly random value (a dummy whose law Q does not depend on the value).

    Guarantee (one report, any two values v, v'; m_y = min_w M(y|w) <= Q(y), and M is t-LDP):
    P[y|v] / P[y|v'] <= (pi e^t m_y + (1-pi) Q(y)) / (pi m_y + (1-pi) Q(y)), which decreases
    in Q(y), so is at most pi e^t + 1 - pi = 1 + pi (e^t - 1) = e^eps.

    The reports are the t-oracle's (same wire form and checks); they estimate the counts of
    the reported values, pi c_v + (1 - pi) n / d in expectation, which `estimate` unmixes."""

    name = SAMPLE

    def __init__(self, inner: FrequencyOracle, epsilon: float) -> None:
        self.inner = inner
        self.probability = sample_probability(check_epsilon(epsilon), inner.epsilon)
        # The guarantee from the inner oracle's actual epsilon (ln(1 + pi (e^t - 1)) = eps).
        super().__init__(
            epsilon=math.log1p(self.probability * math.expm1(inner.epsilon)),
            domain_size=inner.domain_size,
        )
        self.fields = inner.fields

    # -- client ----------------------------------------------------------------------------
    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        # Exact samplers (client/samplers.py): a pi-coin, else a uniform dummy value.
        values = np.asarray(values, dtype=np.int64)
        true = sample_bernoulli(rng, self.probability, values.size)
        dummies = sample_uniform_below(rng, self.domain_size, values.size)
        return self.inner.perturb_batch(np.where(true, values, dummies), rng)

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return self.inner.encode(batch)

    def decode(self, reports: object) -> ReportBatch:
        return self.inner.decode(reports)

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.inner.support_size

    @property
    def support_work(self) -> int:
        return self.inner.support_work

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return self.inner.support(batch)

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        mixed = self.inner.estimate(support, n)  # unbiased for the reported values' counts
        dummies = (1 - self.probability) * n / self.domain_size
        return np.asarray((mixed - dummies) / self.probability, dtype=np.float64)

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """(E Var_t(reported values) + Var(reported counts)) / pi^2. The oracles' variances
        are linear in f, so the first is the t-oracle's at f' = pi f + (1 - pi)/d; a user
        reports value v with probability a = pi + (1 - pi)/d if v is theirs, else b = (1-pi)/d."""
        pi, d = self.probability, self.domain_size
        f = np.zeros(d) if frequencies is None else np.asarray(frequencies, dtype=np.float64)
        a, b = pi + (1 - pi) / d, (1 - pi) / d
        reported = self.inner.variance(n, pi * f + (1 - pi) / d)
        mixing = n * (f * a * (1 - a) + (1 - f) * b * (1 - b))
        return np.asarray((reported + mixing) / pi**2, dtype=np.float64)

    # -- the whole law and the privacy audit -------------------------------------------------
    @property
    def output_count(self) -> int | None:
        return self.inner.output_count

    def output_index(self, batch: ReportBatch) -> NDArray[np.int64]:
        return self.inner.output_index(batch)

    def output_law(self, value: int) -> NDArray[np.float64]:
        """pi M(.|v) + (1 - pi) Q, Q = (1/d) sum_w M(.|w): the law perturb_batch draws."""
        law = self.probability * self.inner.output_law(value)
        return np.asarray(law + (1 - self.probability) * self._dummy_law, dtype=np.float64)

    @functools.cached_property
    def _dummy_law(self) -> NDArray[np.float64]:
        laws = [self.inner.output_law(w) for w in range(self.domain_size)]
        return np.asarray(np.mean(laws, axis=0), dtype=np.float64)

    # The privacy loss of a mixture is not constant on the inner oracle's pair events (Q
    # varies inside them), so the audit events are the reports themselves when the inner
    # oracle lists them (DE, HR, small SUE/OUE): the exact audit is then over every output.
    @property
    def audit_event_count(self) -> int:  # type: ignore[override]
        listed = self.inner.output_count
        return self.inner.audit_event_count if listed is None else listed

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        if self.inner.output_count is None:
            return self.inner.audit_events(batch, value, other)
        return self.inner.output_index(batch)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        if self.inner.output_count is None:
            # Q on the pair's events needs the inner oracle's law under every third value,
            # which only a listed law gives: the sampled audit measures these.
            raise NotImplementedError("the exact audit needs an inner oracle that lists its law")
        return self.output_law(value)


@dataclass(frozen=True)
class LevelPart:
    """One level's share of a window: its oracle, n reports and unbiased count estimate."""

    level: str
    oracle: FrequencyOracle
    n: int
    estimate: Vector


@dataclass(frozen=True)
class Combination:
    """Per-level estimates combined with inverse-variance weights (see `combine`)."""

    parts: tuple[LevelPart, ...]
    #: Per level, per item: the weight of the level's estimated frequency (sums to 1).
    weights: dict[str, Vector]
    estimate: Vector
    #: Variance of `estimate` when every f_v = 0: n^2 / sum_l 1/Var0(f^_l).
    null_variance: Vector

    @property
    def n(self) -> int:
        return sum(part.n for part in self.parts)

    def variance(self, frequencies: Vector | None = None) -> Vector:
        """Exact variance of `estimate` for items of true frequency f_v (None: f_v = 0):
        n^2 sum_l w_l^2 Var_l(c^_l) / n_l^2, the weights being fixed given the n_l."""
        n = self.n
        total = np.zeros_like(self.estimate)
        for part in self.parts:
            weight = self.weights[part.level]
            total += weight**2 * part.oracle.variance(part.n, frequencies) / part.n**2
        result: Vector = n**2 * total
        return result


def combine(parts: Sequence[LevelPart]) -> Combination:
    """The minimum-variance unbiased linear combination of per-level estimates.

    Assumption (the paper's setting): every level's users draw values from the same
    distribution f, so f^_l = c^_l / n_l is unbiased for the same f_v at every level. Among
    sum_l w_l f^_l with sum_l w_l = 1 (unbiased for f_v) the variance sum_l w_l^2 Var(f^_l)
    is smallest for w_l proportional to 1 / Var(f^_l); the estimate of the total count is
    n sum_l w_l f^_l, of variance n^2 / sum_l 1/Var(f^_l). The weights use the f_v-free term
    Var0(f^_l) = Var(c^_l | f_v = 0) / n_l^2, so they do not depend on the data and the
    combination is exactly unbiased; a level with little information (small n_l, small
    epsilon) has a large Var0 and gets a weight near 0. Levels with n_l = 0 are left out.
    """
    used = tuple(part for part in parts if part.n > 0)
    if not used:
        raise ParameterError("n", "no level has any report to combine")
    precisions = [
        part.n**2 / np.asarray(part.oracle.variance(part.n, None), dtype=np.float64)
        for part in used
    ]
    total = np.sum(precisions, axis=0)
    weights = {part.level: p / total for part, p in zip(used, precisions, strict=True)}
    n = sum(part.n for part in used)
    estimate = n * np.sum([weights[p.level] * p.estimate / p.n for p in used], axis=0)
    return Combination(
        parts=used,
        weights=weights,
        estimate=np.asarray(estimate, dtype=np.float64),
        null_variance=np.asarray(n**2 / total, dtype=np.float64),
    )
