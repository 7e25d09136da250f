"""Statistical checks shared by the oracle tests: tolerances come from the theory.

- unbiasedness: one large simulation; every item's error in its own exact standard errors,
  |z| < 4 (with d <= 64 items a correct oracle fails with probability < 64 * 6.3e-5);
- variance: R independent simulations; each item's sample variance over the exact variance
  lies inside the chi-square(R-1) interval at level 1e-4 / d (Bonferroni over the items).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from ldptel.client.oracles import FrequencyOracle

Z_LIMIT = 4.0
VARIANCE_ALPHA = 1e-4


def values_of(counts: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
    """counts[v] clients holding v, in random order."""
    values = np.repeat(np.arange(counts.size), counts)
    rng.shuffle(values)
    return values


def estimate_once(
    oracle: FrequencyOracle, counts: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """Perturb, count and estimate sum(counts) reports through the oracle's own code."""
    batch = oracle.perturb_batch(values_of(counts, rng), rng)
    return oracle.estimate(oracle.support(batch), int(counts.sum()))


def z_scores(
    oracle: FrequencyOracle, counts: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """(estimate - true count) / exact standard error, per item."""
    n = int(counts.sum())
    variance = oracle.variance(n, counts / n)
    return (estimate_once(oracle, counts, rng) - counts) / np.sqrt(variance)


def variance_ratios(
    oracle: FrequencyOracle, counts: NDArray[np.int64], trials: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], tuple[float, float]]:
    """Per item: sample variance of `trials` estimates / exact variance, and the interval
    a correct oracle's ratios stay in (chi-square, Bonferroni over items)."""
    n = int(counts.sum())
    values = np.concatenate([values_of(counts, rng) for _ in range(trials)])
    batch: dict[str, Any] = oracle.perturb_batch(values, rng)
    trial_batches = [{k: c[t * n : (t + 1) * n] for k, c in batch.items()} for t in range(trials)]
    estimates = np.array([oracle.estimate(oracle.support(b), n) for b in trial_batches])
    ratios = estimates.var(axis=0, ddof=1) / oracle.variance(n, counts / n)
    alpha = VARIANCE_ALPHA / counts.size
    low = stats.chi2.ppf(alpha / 2, trials - 1) / (trials - 1)
    high = stats.chi2.ppf(1 - alpha / 2, trials - 1) / (trials - 1)
    return ratios, (float(low), float(high))


def event_frequency_z(
    oracle: FrequencyOracle, value: int, other: int, samples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """z of each audit event's observed count against its exact probability: the perturb
    code and the probabilities the exact audit trusts must agree."""
    batch = oracle.perturb_batch(np.full(samples, value, dtype=np.int64), rng)
    events = oracle.audit_events(batch, value, other)
    counts = np.bincount(events, minlength=oracle.audit_event_count)
    expected = samples * oracle.audit_probabilities(value, other)
    spread = np.sqrt(np.maximum(expected * (1 - expected / samples), 1e-12))
    return (counts - expected) / spread
