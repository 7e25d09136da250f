"""Measure an oracle's privacy loss: max over inputs v, v' and events e of
ln(P[e | v] / P[e | v']), which epsilon-LDP bounds by epsilon.

Two audits, because they check different things:
- exact: the oracle's event probabilities from its parameters (`audit_probabilities`) -- the
  math; it cannot see a perturb implementation that disagrees with its parameters. For the
  Sample mechanism (client/levels.py) over an oracle that lists its reports, the events are
  every possible report, so the loss is exact over all outputs and all pairs (d <= 32);
- sampled: reports drawn through `perturb_batch`, mapped to events (`audit_events`) and
  counted -- the code. The loss gets a lower confidence bound (Chernoff-Hoeffding KL bounds on
  each probability, Bonferroni over events, directions and pairs); the claim is violated only
  if even that lower bound exceeds the claimed epsilon, so a correct oracle fails with
  probability at most 1 - confidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.simulation import Progress, chunk_rows
from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import Field, ReportBatch, check_int
from ldptel.client.randomness import Rng

#: Unordered input pairs audited exactly: every pair while d(d-1)/2 fits (d <= 32).
EXACT_PAIRS = 32 * 31 // 2
DEFAULT_SAMPLES = 200_000
DEFAULT_SAMPLED_PAIRS = 3
DEFAULT_CONFIDENCE = 0.999
#: Slack for floating-point rounding when comparing the exact loss with the claim.
EXACT_TOLERANCE = 1e-9
ROUNDING = 1e-15


class Audited(Protocol):
    """What the audits need: a law on the inputs 0..domain_size-1 with its audit hooks (a
    FrequencyOracle, or a numeric mechanism's law on its levels, analysis/numeric.py)."""

    @property
    def name(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def domain_size(self) -> int: ...
    @property
    def audit_event_count(self) -> int: ...
    @property
    def fields(self) -> tuple[Field, ...]: ...
    def perturb_batch(self, values: NDArray[np.int64], rng: Rng) -> ReportBatch: ...
    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]: ...
    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]: ...


@dataclass(frozen=True)
class ExactAudit:
    epsilon: float
    pairs: int  # ordered pairs
    worst_pair: tuple[int, int]


@dataclass(frozen=True)
class SampledAudit:
    epsilon: float  # point estimate (events seen for both inputs)
    lower_bound: float
    samples: int  # reports per input per pair
    pairs: int  # ordered pairs
    confidence: float
    worst_pair: tuple[int, int]


@dataclass(frozen=True)
class AuditResult:
    """Claimed vs measured privacy loss of one oracle; `violated` is the verdict."""

    oracle: str
    claimed_epsilon: float
    exact_epsilon: float | None
    exact_pairs: int
    sampled_epsilon: float | None
    sampled_lower_bound: float | None
    samples: int
    sampled_pairs: int
    confidence: float
    violated: bool
    #: The ordered input pair (value, other) where each audit found the largest loss.
    exact_worst_pair: tuple[int, int] | None = None
    sampled_worst_pair: tuple[int, int] | None = None

    @property
    def verdict(self) -> str:
        return "violated" if self.violated else "ok"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinite losses become the string "inf")."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, float) and not math.isfinite(value):
                data[key] = str(value)
        data["verdict"] = self.verdict
        return data


def audit_pairs(domain_size: int, limit: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Up to `limit` distinct unordered input pairs (v < v'): all of them if they fit, else
    (0, 1), (0, d-1) and a uniform sample."""
    d = check_int(domain_size, "domain_size", 2)
    limit = check_int(limit, "pairs", 1)
    if d * (d - 1) // 2 <= limit:
        return [(v, w) for v in range(d) for w in range(v + 1, d)]
    chosen = dict.fromkeys([(0, 1), (0, d - 1)][:limit])
    while len(chosen) < limit:
        v, w = (int(x) for x in rng.choice(d, size=2, replace=False))
        chosen[(min(v, w), max(v, w))] = None
    return list(chosen)


def _loss(p: NDArray[np.float64], q: NDArray[np.float64]) -> float:
    """max_e ln(p_e / q_e) over events with p_e > 0 (infinite if some q_e = 0 < p_e).
    Probabilities within rounding of 0 (e.g. 1 - p - q when it is exactly 0) count as 0."""
    seen = p > ROUNDING
    if np.any(seen & (q <= ROUNDING)):
        return math.inf
    return float(np.max(np.log(p[seen] / q[seen]))) if np.any(seen) else -math.inf


def exact_audit(oracle: Audited, pairs: int | list[tuple[int, int]] = EXACT_PAIRS) -> ExactAudit:
    """Privacy loss from the oracle's exact event probabilities, over both orders of each
    pair (given, or up to `pairs` of them: all for d <= 32 by default, else a fixed sample)."""
    if isinstance(pairs, int):
        pairs = audit_pairs(oracle.domain_size, pairs, np.random.default_rng(0))
    worst, worst_pair = -math.inf, pairs[0]
    for v, w in pairs:
        p_v = np.asarray(oracle.audit_probabilities(v, w), dtype=np.float64)
        p_w = np.asarray(oracle.audit_probabilities(w, v), dtype=np.float64)
        for (a, b), loss in (((v, w), _loss(p_v, p_w)), ((w, v), _loss(p_w, p_v))):
            if loss > worst:
                worst, worst_pair = loss, (a, b)
    return ExactAudit(epsilon=worst, pairs=2 * len(pairs), worst_pair=worst_pair)


def _kl(p_hat: NDArray[np.float64], p: NDArray[np.float64]) -> NDArray[np.float64]:
    """Bernoulli KL divergence KL(p_hat || p), with 0 ln 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p_hat > 0, p_hat * np.log(p_hat / p), 0.0)
        b = np.where(p_hat < 1, (1 - p_hat) * np.log((1 - p_hat) / (1 - p)), 0.0)
    return np.asarray(a + b, dtype=np.float64)


def binomial_bounds(
    successes: NDArray[np.int64], trials: int, delta: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One-sided (lower, upper) bounds on a binomial probability, each failing with
    probability <= delta: the Chernoff-Hoeffding bound P[p_hat >= x] <= exp(-n KL(x || p))
    inverted, {p : n KL(p_hat || p) <= ln(1/delta)} (Hoeffding 1963, Thm. 1)."""
    p_hat = np.asarray(successes, dtype=np.float64) / trials
    budget = math.log(1.0 / delta) / trials
    # KL(p_hat || p) decreases in p below p_hat and increases above: bisect each side.
    low, high = np.zeros_like(p_hat), p_hat.copy()
    for _ in range(64):
        mid = (low + high) / 2
        inside = _kl(p_hat, mid) <= budget
        high = np.where(inside, mid, high)
        low = np.where(inside, low, mid)
    lower = np.where(p_hat > 0, low, 0.0)
    low, high = p_hat.copy(), np.ones_like(p_hat)
    for _ in range(64):
        mid = (low + high) / 2
        inside = _kl(p_hat, mid) <= budget
        low = np.where(inside, mid, low)
        high = np.where(inside, high, mid)
    upper = np.where(p_hat < 1, high, 1.0)
    return lower, upper


def event_counts(
    oracle: Audited,
    value: int,
    other: int,
    samples: int,
    rng: np.random.Generator,
    reported: Callable[[int], None] = lambda size: None,
) -> NDArray[np.int64]:
    """How often each audit event of {value, other} occurs in `samples` reports of `value`;
    `reported(size)` after each chunk of reports."""
    counts = np.zeros(oracle.audit_event_count, dtype=np.int64)
    rows = chunk_rows(oracle)
    for start in range(0, samples, rows):
        size = min(rows, samples - start)
        batch = oracle.perturb_batch(np.full(size, value, dtype=np.int64), rng)
        events = oracle.audit_events(batch, value, other)
        counts += np.bincount(events, minlength=oracle.audit_event_count)
        reported(size)
    return counts


def sampled_audit(
    oracle: Audited,
    rng: np.random.Generator,
    samples: int = DEFAULT_SAMPLES,
    pairs: int | list[tuple[int, int]] = DEFAULT_SAMPLED_PAIRS,
    confidence: float = DEFAULT_CONFIDENCE,
    progress: Progress | None = None,
) -> SampledAudit:
    """Privacy loss measured on reports from `perturb_batch`: a point estimate and a lower
    bound that holds with probability >= confidence over all pairs, directions and events.
    `progress(done, total)` counts the reports drawn."""
    samples = check_int(samples, "samples", 100)
    if not 0 < confidence < 1:
        raise ParameterError("confidence", f"must be in (0, 1), got {confidence!r}")
    if isinstance(pairs, int):
        pairs = audit_pairs(oracle.domain_size, pairs, rng)
    events = oracle.audit_event_count
    # Each (pair, direction, event) bound combines a lower and an upper bound.
    delta = (1 - confidence) / (len(pairs) * 2 * events * 2)
    point, bound, worst_pair = -math.inf, -math.inf, pairs[0]
    total, done = 2 * len(pairs) * samples, 0

    def reported(size: int) -> None:
        nonlocal done
        done += size
        if progress is not None:
            progress(done, total)

    for v, w in pairs:
        counts = {
            x: event_counts(oracle, x, y, samples, rng, reported) for x, y in ((v, w), (w, v))
        }
        lower = {x: binomial_bounds(c, samples, delta)[0] for x, c in counts.items()}
        upper = {x: binomial_bounds(c, samples, delta)[1] for x, c in counts.items()}
        for a, b in ((v, w), (w, v)):
            with np.errstate(divide="ignore"):
                loss_bound = float(np.max(np.log(lower[a]) - np.log(upper[b])))
            both = (counts[a] > 0) & (counts[b] > 0)
            if np.any(both):
                point = max(point, float(np.max(np.log(counts[a][both] / counts[b][both]))))
            if loss_bound > bound:
                bound, worst_pair = loss_bound, (a, b)
    return SampledAudit(
        epsilon=point,
        lower_bound=bound,
        samples=samples,
        pairs=2 * len(pairs),
        confidence=confidence,
        worst_pair=worst_pair,
    )


def audit(
    oracle: Audited,
    rng: np.random.Generator,
    samples: int = DEFAULT_SAMPLES,
    sampled_pairs: int = DEFAULT_SAMPLED_PAIRS,
    confidence: float = DEFAULT_CONFIDENCE,
    exact: bool = True,
    sampled: bool = True,
    exact_pairs: int = EXACT_PAIRS,
    progress: Progress | None = None,
) -> AuditResult:
    """Both audits against the oracle's claimed `epsilon`; violated if either refutes it."""
    claimed = oracle.epsilon
    exact_result = exact_audit(oracle, exact_pairs) if exact else None
    sampled_result = (
        sampled_audit(oracle, rng, samples, sampled_pairs, confidence, progress)
        if sampled
        else None
    )
    violated = (
        exact_result is not None and exact_result.epsilon > claimed * (1 + EXACT_TOLERANCE)
    ) or (sampled_result is not None and sampled_result.lower_bound > claimed)
    return AuditResult(
        oracle=oracle.name,
        claimed_epsilon=claimed,
        exact_epsilon=None if exact_result is None else exact_result.epsilon,
        exact_pairs=0 if exact_result is None else exact_result.pairs,
        sampled_epsilon=None if sampled_result is None else sampled_result.epsilon,
        sampled_lower_bound=None if sampled_result is None else sampled_result.lower_bound,
        samples=0 if sampled_result is None else sampled_result.samples,
        sampled_pairs=0 if sampled_result is None else sampled_result.pairs,
        confidence=confidence,
        violated=bool(violated),
        exact_worst_pair=None if exact_result is None else exact_result.worst_pair,
        sampled_worst_pair=None if sampled_result is None else sampled_result.worst_pair,
    )
