"""Per-item statistics of a report: estimates, exact variances, standard errors, confidence
intervals, consistent estimates and significance thresholds, as columns (ItemColumns), for
every estimator the reports use. Pure numpy/scipy: no Redis, no document building."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import TypedDict, TypeGuard

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.consistency import consistent
from ldptel.aggregator.reports.options import ReportOptions
from ldptel.aggregator.state import LogView
from ldptel.client.discovery.threshold import candidates_threshold
from ldptel.client.hashing import item_keys
from ldptel.client.oracles import FrequencyOracle, PureOracle
from ldptel.client.oracles.base import ReportLog
from ldptel.client.oracles.keys import KeyMechanism
from ldptel.client.oracles.local_hashing import KeyLocalHashing
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.oracles.rappor_decode import alone_variance
from ldptel.client.oracles.sketch import KeySketch

#: Norm-Sub's "sums to n" does not hold for a candidate list: only non-negative (Base-Pos).
OPEN_CONSISTENCY = "clip"
#: Reports read from a report log per chunk (6 MiB of OLH records); the hashing of a chunk
#: against the candidates keeps its own temporaries small (LocalHashing.key_support).
LOG_CHUNK_RECORDS = 1 << 20


class ItemColumns(TypedDict):
    """Per-item statistics as columns (index = item index), before they become Items."""

    estimate: NDArray[np.float64]
    variance: NDArray[np.float64]
    stderr: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    consistent: NDArray[np.float64]
    threshold: NDArray[np.float64]
    significant: NDArray[np.bool_]


def significance_z(domain_size: int, false_flags: float) -> float:
    """One-sided z with Bonferroni's correction: P(flag | f_v = 0) = false_flags / d per item,
    so the expected number of false flags over the domain is false_flags."""
    return NormalDist().inv_cdf(1 - false_flags / domain_size)


def exact_null_threshold(oracle: FrequencyOracle, n: int, options: ReportOptions) -> float | None:
    """The significance threshold of a pure oracle from the exact null distribution: the
    support count of an item nobody holds is Binomial(n, q*) (independent reports; Wang et al.
    2017, Sec. 4), so with k the smallest count with P(count > k) <= false_flags / d, the flag
    "estimate > (k - n q*) / (p* - q*)" is "count > k". The normal approximation is far off in
    this tail when counts are small (DE at d = 1024, n = 1000: ~3.5 false flags a report, not
    0.05). None for other oracles (normal approximation)."""
    if not isinstance(oracle, PureOracle):
        return None
    return binomial_null_threshold(oracle, n, options.false_flags / oracle.domain_size)


def binomial_null_threshold(oracle: PureOracle | KeyLocalHashing, n: int, tail: float) -> float:
    """(k - n q*) / (p* - q*) with k the smallest count with P(Binomial(n, q*) > k) <= tail:
    the estimate an item nobody holds exceeds with probability at most `tail`."""
    from scipy.stats import binom

    p, q = oracle.p_star, oracle.q_star
    k = float(binom.isf(tail, n, q))
    return (k - n * q) / (p - q)


def has_decoder_fit(oracle: FrequencyOracle) -> TypeGuard[Rappor]:
    """Whether the oracle's estimator is not exact and its own fit gives the standard errors
    and significance (full RAPPOR)."""
    return not oracle.exact_estimator and isinstance(oracle, Rappor)


def item_statistics(
    oracle: FrequencyOracle, support: NDArray[np.int64], n: int, options: ReportOptions
) -> ItemColumns:
    """Per item: estimate, variance, stderr, CI bounds, consistent estimate, and the
    significance threshold with the flag."""
    if has_decoder_fit(oracle):
        return fit_statistics(oracle, support, n, options)
    threshold = exact_null_threshold(oracle, n, options)
    return estimate_statistics(oracle.estimate(support, n), oracle.variance, n, options, threshold)


def estimate_statistics(
    estimate: NDArray[np.float64],
    variance_of: Callable[[int, NDArray[np.float64] | None], NDArray[np.float64]],
    n: int,
    options: ReportOptions,
    null_threshold: float | None = None,
) -> ItemColumns:
    """item_statistics of unbiased estimates whose exact variance is variance_of(n, f); the
    significance threshold is `null_threshold` if given, else z * the stderr under f_v = 0
    (normal approximation, one-sided, Bonferroni)."""
    # The f_v term of the variance uses the (clipped) estimated frequency of the item.
    frequencies = np.clip(estimate / n, 0.0, 1.0)
    variance = variance_of(n, frequencies)
    stderr = np.sqrt(variance)
    ci_low, ci_high = confidence_interval(estimate, stderr, options.confidence)
    if null_threshold is None:
        # Significance tests f_v = 0, so it uses the variance under that null hypothesis.
        null_stderr = np.sqrt(variance_of(n, None))
        threshold = significance_z(estimate.size, options.false_flags) * null_stderr
    else:
        threshold = np.full(estimate.size, null_threshold)
    return {
        "estimate": estimate,
        "variance": variance,
        "stderr": stderr,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "consistent": consistent(options.consistency, estimate, n, threshold),
        "threshold": threshold,
        "significant": estimate > threshold,
    }


def fit_statistics(
    oracle: Rappor, support: NDArray[np.int64], n: int, options: ReportOptions
) -> ItemColumns:
    """item_statistics from the decoder's own fit (Rappor.fit at alpha = false_flags): its
    stderr, and its Bonferroni verdicts as the flags (threshold = z * that stderr). When every
    candidate is identifiable the fit is least squares, unbiased, and its stderr the
    repetition spread (benchmarks/README.md, "RAPPOR calibration"), so the CIs cover."""
    fit = oracle.fit(support, alpha=options.false_flags)
    # Only the non-negative fit (many candidates) leaves candidates at 0, with no standard
    # error of their own (on the boundary): the design stderr under f_v = 0, not significant.
    null_variance = oracle.variance(n, None)
    if not np.isfinite(null_variance).all():  # more candidates than m·k bits: no design
        null_variance = alone_variance(oracle, n)  # stderr; JSON carries no Infinity
    stderr = np.where(fit.selected, fit.stderr, np.sqrt(null_variance))
    ci_low, ci_high = confidence_interval(fit.estimate, stderr, options.confidence)
    # Base-Cut keeps exactly the candidates the fit calls significant.
    verdict = np.where(fit.significant, -np.inf, np.inf)
    return {
        "estimate": fit.estimate.copy(),
        "variance": stderr**2,
        "stderr": stderr,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "consistent": consistent(options.consistency, fit.estimate, n, verdict),
        "threshold": significance_z(fit.estimate.size, options.false_flags) * stderr,
        "significant": fit.significant.copy(),
    }


def open_domain_statistics(
    oracle: KeySketch,
    support: NDArray[np.int64],
    n: int,
    candidates: Sequence[str],
    options: ReportOptions,
) -> tuple[ItemColumns, float]:
    """item_statistics of candidate strings estimated from a sketch (estimate_keys), and the
    release threshold of a candidate nobody holds (client/discovery/threshold.py: it holds if
    the most-held string is a candidate). The variance adds the fixed hash family's term
    (KeySketch.family_variance) with the candidates' estimated counts, clipped at 0:
    values outside the candidates are not in it, so it holds when the heavy values are
    candidates; the clipped noise of the others only makes it larger (conservative)."""
    estimate = oracle.estimate_keys(support, n, item_keys(candidates))
    counts = np.clip(np.rint(estimate), 0, n).astype(np.int64)
    family = oracle.family_variance(counts)

    def variance_of(n: int, frequencies: NDArray[np.float64] | None) -> NDArray[np.float64]:
        f = np.zeros(estimate.size) if frequencies is None else frequencies
        return oracle.key_variance(n, f) + family

    nobody = candidates_threshold(oracle, n, estimate, options.false_flags / estimate.size)
    stats = estimate_statistics(estimate, variance_of, n, options, null_threshold=nobody)
    stats["consistent"] = consistent(OPEN_CONSISTENCY, estimate, n, stats["threshold"])
    return stats, nobody


def log_candidate_support(
    oracle: ReportLog, log: LogView, candidates: Sequence[str]
) -> NDArray[np.int64]:
    """Per candidate, how many logged reports support it: n x C hash evaluations, the log
    read LOG_CHUNK_RECORDS reports at a time (memory bounded whatever n)."""
    keys = item_keys(candidates)
    support = np.zeros(len(keys), dtype=np.int64)
    for chunk in log.chunks(LOG_CHUNK_RECORDS):
        support += oracle.key_support(oracle.log_batch(chunk), keys)
    return support


def log_statistics(
    oracle: KeyLocalHashing, support: NDArray[np.int64], n: int, options: ReportOptions
) -> tuple[ItemColumns, float]:
    """item_statistics of candidates from their support counts over a report log (Wang et
    al.'s estimate and exact variance, p* = p, q* = 1/g), and the release threshold: the
    exact Binomial(n, q*) quantile at expected_false_discoveries / candidates."""
    threshold = binomial_null_threshold(oracle, n, options.false_flags / support.size)
    estimate = oracle.key_estimate(support, n)

    def variance_of(n: int, frequencies: NDArray[np.float64] | None) -> NDArray[np.float64]:
        f = np.zeros(estimate.size) if frequencies is None else frequencies
        return oracle.key_variance(n, f)

    stats = estimate_statistics(estimate, variance_of, n, options, null_threshold=threshold)
    stats["consistent"] = consistent(OPEN_CONSISTENCY, estimate, n, stats["threshold"])
    return stats, threshold


#: An open-domain state's candidate statistics: (columns, release threshold) of candidates.
CandidateStatistics = Callable[[Sequence[str]], tuple[ItemColumns, float]]


def noise_stderr(oracle: KeyMechanism, n: int) -> float:
    """The stderr of the reports' noise in the estimate of a candidate nobody holds: an open
    domain's `significance.z` is its release threshold in these units."""
    return math.sqrt(float(oracle.key_variance(n, np.zeros(1))[0]))


def confidence_interval(
    estimate: NDArray[np.float64], stderr: NDArray[np.float64], confidence: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two-sided normal interval estimate -/+ Phi^-1((1 + confidence) / 2) * stderr."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return estimate - z * stderr, estimate + z * stderr
