"""Statistical checks of the oracle contract, reusable for any oracle, with tolerances from
the theory (and tests in test_contract.py proving each check fails on a wrong estimator).

T independent repetitions of the same known counts through the oracle's own code give a
(T, d) array of estimates:
- unbiasedness: per item, z = (mean estimate - true count) / sqrt(Var / T) with the exact
  variance; |z| below the two-sided normal quantile at alpha / d (Bonferroni over items);
- variance: Q_t = sum_v (estimate_tv - true_v)^2 / Var_v has mean exactly d when the
  estimator is unbiased with exactly that variance (a chi-square(d) when items are
  independent and normal). The T values Q_t are iid, so the mean of Q lies within
  z_limit standard errors (from Q's own sample spread, which stays valid when items are
  correlated, as for DE or OLH) of d.

Single-oracle tests use two simpler forms: one large simulation with every item's error in
its own exact standard errors (`z_scores`, |z| < Z_LIMIT: with d <= 64 items a correct oracle
fails with probability < 64 * 6.3e-5), and per-item sample variances over T repetitions inside
the chi-square(T-1) interval at level VARIANCE_ALPHA / d (`variance_ratios`, Bonferroni).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.simulation import item_probabilities
from ldptel.client.oracles import FrequencyOracle
from ldptel.client.oracles.base import ReportBatch

ALPHA = 1e-3
Z_LIMIT = 4.0
VARIANCE_ALPHA = 1e-4
Seed = int | np.random.Generator


def known_counts(n: int, domain_size: int) -> NDArray[np.int64]:
    """Fixed zipf-shaped counts summing to n (the rounding remainder goes to item 0)."""
    counts = np.floor(n * item_probabilities(domain_size, "zipf", 1.1)).astype(np.int64)
    counts[0] += n - counts.sum()
    return counts


def slice_batch(batch: ReportBatch, start: int, stop: int) -> ReportBatch:
    return {name: column[start:stop] for name, column in batch.items()}


def concat_batches(*batches: ReportBatch) -> ReportBatch:
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


@dataclass(frozen=True)
class Repetitions:
    """T estimates of the same true counts, and the exact per-item variance."""

    counts: NDArray[np.int64]
    estimates: NDArray[np.float64]  # (T, d)
    variance: NDArray[np.float64]  # (d,)

    @property
    def trials(self) -> int:
        return int(self.estimates.shape[0])


def repeat_estimates(
    oracle: FrequencyOracle, counts: NDArray[np.int64], trials: int, seed: Seed
) -> Repetitions:
    """Perturb T copies of the counts in one batch; estimate each copy from its support."""
    rng = np.random.default_rng(seed)
    n = int(counts.sum())
    values = np.tile(np.repeat(np.arange(counts.size), counts), trials)
    batch = oracle.perturb_batch(values, rng)
    estimates = np.array(
        [
            oracle.estimate(oracle.support(slice_batch(batch, t * n, (t + 1) * n)), n)
            for t in range(trials)
        ]
    )
    return Repetitions(counts, estimates, oracle.variance(n, counts / n))


def bias_z(reps: Repetitions) -> NDArray[np.float64]:
    """Per item: error of the mean estimate in its own exact standard errors."""
    error = reps.estimates.mean(axis=0) - reps.counts
    z: NDArray[np.float64] = error / np.sqrt(reps.variance / reps.trials)
    return z


def z_scores(oracle: FrequencyOracle, counts: NDArray[np.int64], seed: Seed) -> NDArray[np.float64]:
    """(estimate - true count) / exact standard error, per item, from one simulation."""
    return bias_z(repeat_estimates(oracle, counts, 1, seed))


def check_unbiased(reps: Repetitions, alpha: float = ALPHA) -> None:
    z = bias_z(reps)
    limit = stats.norm.isf(alpha / (2 * z.size))
    worst = int(np.argmax(np.abs(z)))
    assert abs(z[worst]) < limit, (
        f"item {worst}: mean estimate off by {z[worst]:+.2f} standard errors (limit {limit:.2f})"
    )


def variance_ratio(reps: Repetitions) -> tuple[float, float]:
    """(empirical / exact variance pooled over items, its z against 1)."""
    q = (((reps.estimates - reps.counts) ** 2) / reps.variance).sum(axis=1)
    d = reps.counts.size
    z = (q.mean() - d) / (q.std(ddof=1) / np.sqrt(reps.trials))
    return float(q.mean() / d), float(z)


def variance_ratios(
    oracle: FrequencyOracle, counts: NDArray[np.int64], trials: int, seed: Seed
) -> tuple[NDArray[np.float64], tuple[float, float]]:
    """Per item: sample variance of `trials` estimates / exact variance, and the interval
    a correct oracle's ratios stay in (chi-square, Bonferroni over items)."""
    reps = repeat_estimates(oracle, counts, trials, seed)
    ratios: NDArray[np.float64] = reps.estimates.var(axis=0, ddof=1) / reps.variance
    alpha = VARIANCE_ALPHA / counts.size
    low = stats.chi2.ppf(alpha / 2, trials - 1) / (trials - 1)
    high = stats.chi2.ppf(1 - alpha / 2, trials - 1) / (trials - 1)
    return ratios, (float(low), float(high))


def check_variance(reps: Repetitions, z_limit: float = Z_LIMIT) -> None:
    ratio, z = variance_ratio(reps)
    assert abs(z) < z_limit, (
        f"empirical/exact variance {ratio:.3f} is {z:+.2f} standard errors from 1"
    )


def miscalibrated(
    oracle: FrequencyOracle, estimate_factor: float = 1.0, variance_factor: float = 1.0
) -> FrequencyOracle:
    """A copy of `oracle` whose estimate and/or variance is scaled (a wrong estimator)."""
    base: Any = type(oracle)

    def estimate(self: Any, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        return np.asarray(base.estimate(self, support, n) * estimate_factor)

    def variance(self: Any, n: int, frequencies: Any = None) -> NDArray[np.float64]:
        return np.asarray(base.variance(self, n, frequencies) * variance_factor)

    wrong = copy.copy(oracle)
    wrong.__class__ = type(
        f"Miscalibrated{base.__name__}", (base,), {"estimate": estimate, "variance": variance}
    )
    return wrong


def without_fv_term(oracle: FrequencyOracle) -> FrequencyOracle:
    """A copy of `oracle` whose variance ignores the frequencies (f_v = 0 for every item)."""
    base: Any = type(oracle)
    wrong = copy.copy(oracle)
    wrong.__class__ = type(
        f"NoFv{base.__name__}",
        (base,),
        {"variance": lambda self, n, frequencies=None: base.variance(self, n, None)},
    )
    return wrong


def event_z(
    oracle: FrequencyOracle, value: int, other: int, samples: int, seed: Seed
) -> NDArray[np.float64]:
    """Per audit event: observed count from `perturb_batch` vs its exact probability, in
    binomial standard errors (the exact audit trusts those probabilities)."""
    rng = np.random.default_rng(seed)
    batch = oracle.perturb_batch(np.full(samples, value, dtype=np.int64), rng)
    events = oracle.audit_events(batch, value, other)
    counts = np.bincount(events, minlength=oracle.audit_event_count)
    p = np.asarray(oracle.audit_probabilities(value, other), dtype=np.float64)
    spread = np.sqrt(np.maximum(samples * p * (1 - p), 1e-12))
    z: NDArray[np.float64] = (counts - samples * p) / spread
    return z
