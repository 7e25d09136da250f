"""Reports: the window states of a campaign merged across shards and turned into estimates
with variance, standard error, confidence interval, a consistent estimate and a significance
flag per item, plus the privacy guarantee in numbers and words.

A report covers one (campaign, config id, privacy level, window): configs never mix. The
document stored per window (keys.report) holds the reports of every config seen in it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final, TypedDict, TypeGuard

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.consistency import ALIASES, METHODS, consistent
from ldptel.aggregator.model import (
    Discovery,
    Item,
    LevelRow,
    Privacy,
    Report,
    Window,
    WindowDocument,
    from_json,
    to_json,
)
from ldptel.aggregator.numeric import numeric_estimates
from ldptel.aggregator.privacy import longitudinal, privacy_section
from ldptel.aggregator.state import LogView, StateKey, list_states, read_log, read_state
from ldptel.aggregator.tree import (
    prefix_nodes,
    tree_counts,
    tree_section,
    tree_variance,
    with_tree,
)
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.discovery.threshold import candidates_threshold
from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_keys
from ldptel.client.levels import LevelPart, combine
from ldptel.client.numeric import NumericMechanism
from ldptel.client.oracles import FrequencyOracle, PureOracle
from ldptel.client.oracles.base import ReportLog
from ldptel.client.oracles.olh import OpenDomainOLH
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.oracles.rappor_decode import alone_variance
from ldptel.client.oracles.sketch import SketchOracle
from ldptel.client.tree_wire import TreeReports
from ldptel.store import reports as stored_reports
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry
from ldptel.store.reports import iso

OK: Final = "ok"
NOT_ENOUGH: Final = "not_enough_reports"
#: How the significance threshold was set (report["significance"]["method"]).
NORMAL = "normal approximation: z = the (1 - expected_false_flags / d) normal quantile"
EXACT_BINOMIAL = (
    "exact: the support count of an item nobody holds is Binomial(n, q*); threshold = its "
    "(1 - expected_false_flags / d) quantile, z = threshold / stderr under f = 0"
)
DECODER_FIT = (
    "decoder's fit: one-sided test of count > 0 on the fit's own standard error at level "
    "expected_false_flags / d (Bonferroni); candidates the fit left at 0 are not significant "
    "and carry the design stderr under f = 0"
)

UNCALIBRATED = (
    "stderr and intervals not calibrated: more candidates than m k / 4, so the decoder "
    "selects them (LASSO, then NNLS); a selected count's stderr is conditional on the "
    "selection, a candidate left at 0 carries the design stderr under f = 0. Measured: "
    "variance over repetitions 0.001-0.26 of the stated one, held candidates covered "
    "91-93% by the 95% intervals (benchmarks/README.md, RAPPOR calibration). Use the "
    "significance flags for detection, not the intervals"
)


@dataclass(frozen=True)
class ReportOptions:
    """How reports are built."""

    consistency: str = "norm-sub"
    #: Below this many reports a window says "not enough reports" instead of numbers.
    min_reports: int = 100
    confidence: float = 0.95
    #: Expected number of items wrongly flagged significant over the whole domain.
    false_flags: float = 0.05

    def __post_init__(self) -> None:
        if ALIASES.get(self.consistency, self.consistency) not in METHODS:
            known = ", ".join((*METHODS, *ALIASES))
            raise ParameterError("consistency", f"unknown method; known: {known}")
        if self.min_reports < 1:
            raise ParameterError("min_reports", "must be >= 1")
        if not 0 < self.confidence < 1:
            raise ParameterError("confidence", "must be in (0, 1)")
        if not 0 < self.false_flags < 1:
            raise ParameterError("false_flags", "must be in (0, 1)")


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


def binomial_null_threshold(oracle: PureOracle, n: int, tail: float) -> float:
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
    z_ci = NormalDist().inv_cdf(0.5 + options.confidence / 2)
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
        "ci_low": estimate - z_ci * stderr,
        "ci_high": estimate + z_ci * stderr,
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
    z_ci = NormalDist().inv_cdf(0.5 + options.confidence / 2)
    # Base-Cut keeps exactly the candidates the fit calls significant.
    verdict = np.where(fit.significant, -np.inf, np.inf)
    return {
        "estimate": fit.estimate.copy(),
        "variance": stderr**2,
        "stderr": stderr,
        "ci_low": fit.estimate - z_ci * stderr,
        "ci_high": fit.estimate + z_ci * stderr,
        "consistent": consistent(options.consistency, fit.estimate, n, verdict),
        "threshold": significance_z(fit.estimate.size, options.false_flags) * stderr,
        "significant": fit.significant.copy(),
    }


def privacy_sentences(report: Report) -> list[str]:
    """The privacy parameters of a report in plain words: one sentence per number, each
    naming its adversary, neighbouring relation and delta (ldptel.client.statements)."""
    privacy = report["privacy"]
    if "levels" in privacy:
        return level_privacy_sentences(report)
    eps = privacy["local_epsilon"]
    lines = [
        f"Every report was randomized on the user's device with the {report['oracle'].upper()} "
        f"oracle at epsilon = {eps:.3g} (local differential privacy): whatever one user's true "
        f"value, any report is at most e^{eps:.3g} = {math.exp(eps):.3g} times more likely "
        "under it than under any other value.",
    ]
    if "tree" in report:  # memoization "tree": the bound is over a horizon's reports
        lines[0] = TREE_SENTENCE.format(eps=eps, windows=report["tree"]["horizon_windows"])
    if "local" in privacy:
        lines.append(privacy["local"]["statement"])
    if privacy["reports_per_window"] > 1:
        lines.append(
            f"A user sends at most {privacy['reports_per_window']} reports per window, so a "
            f"user's epsilon in this window is at most {privacy['user_epsilon_per_window']:.3g}."
        )
    if "permanent_epsilon" in privacy:
        rappor = privacy["rappor"]
        lines.append(
            f"RAPPOR (k={rappor['k']}, h={rappor['h']}, m={rappor['m']}, f={rappor['f']:.3g}, "
            f"p={rappor['p']:.3g}, q={rappor['q']:.3g}); permanent bound "
            f"{privacy['permanent_epsilon']:.3g} for the reports of one value under exact "
            "memoization only."
        )
    if "longitudinal" in privacy:
        lines.append("Over a user's whole history: " + privacy["longitudinal"]["statement"])
    central = privacy["central"]
    if central and central["applies"]:
        users = (
            f"{central['n_users']:,} users"
            if privacy["reports_per_window"] == 1
            else f"at least {central['n_users']:,} users"
        )
        lines.append(
            "The collector keeps no identifying metadata, and this report depends only on the "
            f"anonymous multiset of the window's reports (from {users}). " + central["statement"]
        )
    elif central:
        lines.append(central["statement"])
    lifetime = privacy.get("central_lifetime")
    if lifetime and lifetime["applies"]:
        lines.append(lifetime["statement"])
    return lines


def level_privacy_sentences(report: Report) -> list[str]:
    """The privacy of a report combined over privacy levels, in plain words."""
    combined = report["combined"]
    rows = combined["levels"]
    declared = ", ".join(f"{row['level']} {row['epsilon']:.3g}" for row in rows)
    lines = [
        f"Each user chose a privacy level ({declared}); every report was randomized on the "
        f"user's device with the {report['oracle'].upper()} oracle (local differential "
        "privacy) at an epsilon no larger than its level's."
    ]
    if combined["strategy"] == "minimum":
        lines.append(
            f"Strategy minimum: every level reported at the smallest epsilon, "
            f"{report['epsilon']:.3g}."
        )
    elif combined["strategy"] == "threshold":
        lines.append(
            f"Strategy threshold: levels with epsilon below t = {combined['threshold']:.3g} "
            "did not report; the others reported at epsilon t. Estimates cover the users who "
            "reported."
        )
    weights = ", ".join(f"{row['level']} {row['weight']:.3g}" for row in rows if row["n"])
    if weights:
        lines.append(
            f"The levels' estimates are combined with inverse-variance weights ({weights}), "
            f"assuming {combined['assumption']}."
        )
    amplified = [
        f"{level} ({central['epsilon']:.3g}, {central['delta']:.1g})"
        for level, section in report["privacy"]["levels"].items()
        if (central := section["central"]) and central["applies"]
    ]
    if amplified:
        lines.append(
            "The collector keeps no identifying metadata, so each level's reports reach the "
            "analyst as an anonymous multiset, and a user's data touches only their level's "
            "multiset: by amplification by shuffling (Feldman, McMillan, Talwar 2021) these "
            "levels' users are also centrally (epsilon, delta)-private: "
            f"{', '.join(amplified)}."
        )
    if "longitudinal" in report["privacy"]:
        statement = report["privacy"]["longitudinal"]["statement"]
        lines.append(f"Over a user's whole history: {statement} (budgets scale with the level.)")
    return lines


def _window(start: int, seconds: int) -> Window:
    return {
        "start": iso(start),
        "end": iso(start + seconds),
        "start_unix": start,
        "seconds": seconds,
    }


def _head(
    config: CampaignConfig,
    state: StateKey,
    oracle: str,
    epsilon: float,
    n: int,
    options: ReportOptions,
    built_at: float | None,
    privacy: Privacy,
) -> Report:
    """The fields every report has, with no items yet."""
    report: Report = {
        "campaign": config.name,
        "config_id": state.config_id,
        "level": state.level,
        "oracle": oracle,
        "epsilon": epsilon,
        "n": n,
        "window": _window(state.window, config.window_seconds),
        "built_at": iso(time.time() if built_at is None else built_at),
        "status": OK,
        "message": "",
        "min_reports": options.min_reports,
        "confidence": options.confidence,
        "consistency": ALIASES.get(options.consistency, options.consistency),
        "privacy": privacy,
        "items": [],
    }
    if not config.numeric:  # a numeric campaign has no items to flag
        report["significance"] = {
            # Over the domain; an open-domain report sets it over its candidates.
            "z": significance_z(max(config.domain_size, 1), options.false_flags),
            "expected_false_flags": options.false_flags,
            "rule": "estimate > threshold = z * stderr under f = 0 (one-sided, Bonferroni)",
            "method": NORMAL,
        }
    return report


def _not_enough(report: Report) -> bool:
    """Mark a report with too few reports; True if it was."""
    if report["n"] >= report["min_reports"]:
        return False
    report["status"] = NOT_ENOUGH
    report["message"] = (
        f"not enough reports: n = {report['n']} < {report['min_reports']}, too few for estimates"
    )
    return True


def _items(labels: Sequence[str], stats: ItemColumns) -> list[Item]:
    rows = zip(
        labels,
        stats["estimate"].tolist(),
        stats["variance"].tolist(),
        stats["stderr"].tolist(),
        stats["ci_low"].tolist(),
        stats["ci_high"].tolist(),
        stats["consistent"].tolist(),
        stats["threshold"].tolist(),
        stats["significant"].tolist(),
        strict=True,
    )
    return [
        {
            "item": label,
            "index": index,
            "estimate": estimate,
            "variance": variance,
            "stderr": stderr,
            "ci_low": ci_low,
            "ci_high": ci_high,
            "consistent": consistent_estimate,
            "threshold": threshold,
            "significant": significant,
        }
        for index, (
            label,
            estimate,
            variance,
            stderr,
            ci_low,
            ci_high,
            consistent_estimate,
            threshold,
            significant,
        ) in enumerate(rows)
    ]


def build_report(
    config: CampaignConfig,
    oracle: FrequencyOracle | NumericMechanism,
    state: StateKey,
    n: int,
    support: NDArray[np.int64],
    options: ReportOptions,
    built_at: float | None = None,
) -> Report:
    """The report of one state's merged n and support."""
    privacy = privacy_section(config, oracle, n)
    report = _head(config, state, oracle.name, oracle.epsilon, n, options, built_at, privacy)
    if isinstance(oracle, NumericMechanism):
        if not _not_enough(report):
            report["numeric"] = numeric_estimates(oracle, support, n, options.confidence)
        return report
    if not _not_enough(report):
        stats = item_statistics(oracle, support, n, options)
        report["items"] = _items(config.domain, stats)
        if isinstance(oracle, PureOracle):
            # The exact threshold as a z of the null stderr, so the rule reads the same.
            null_stderr = float(np.sqrt(oracle.variance(n, None))[0])
            report["significance"]["z"] = float(stats["threshold"][0]) / null_stderr
            report["significance"]["method"] = EXACT_BINOMIAL
        elif has_decoder_fit(oracle):
            report["significance"]["rule"] = (
                "p-value of count > 0 on the fit's stderr < expected_false_flags / d, i.e. "
                "estimate > threshold = z * the fit's stderr (one-sided, Bonferroni)"
            )
            report["significance"]["method"] = DECODER_FIT
            if not oracle.fit(support, alpha=options.false_flags).least_squares:  # cached
                report["uncalibrated"] = UNCALIBRATED
    return report


@dataclass(frozen=True)
class Candidates:
    """The strings an open-domain report estimates (checked and deduplicated by
    ldptel.client.campaign.check_candidates), and where they came from."""

    values: tuple[str, ...] = ()
    source: str = "none"


DISCOVERY_RULE = (
    "a candidate is listed (discovered) only if estimate > threshold, the threshold a "
    "candidate nobody holds exceeds with probability <= expected_false_discoveries / "
    "candidates over the reports and the hash family, whatever the other strings' counts "
    "below the largest candidate's (its collision offset's worst case, expected shortfall)"
)
#: How a sketch's (and PEM's) release threshold is set (docs/protocol.md, "Candidates").
EXPECTED_SHORTFALL = (
    "expected shortfall: threshold = the expected shortfall at expected_false_discoveries / "
    "candidates of the reports' noise (normal, the oracle's variance at f = 0) plus the worst "
    "case of the fixed hash family's collision offset given the largest candidate's bound; "
    "z = threshold / that noise's stderr"
)
POST_PROCESSING = (
    "Release thresholding is post-processing of the randomized reports: choosing which "
    "candidates to list costs no privacy beyond the reports' epsilon (Dwork & Roth 2014, "
    "Prop. 2.1); only candidates clearing the threshold are listed, so a string held by few "
    "users is not published."
)
#: Norm-Sub's "sums to n" does not hold for a candidate list: only non-negative (Base-Pos).
OPEN_CONSISTENCY = "clip"
#: The rule and method of an open-domain OLH report (its state a report log).
LOG_DISCOVERY_RULE = (
    "a candidate is listed (discovered) only if estimate > threshold, i.e. its support count "
    "exceeds the (1 - expected_false_discoveries / candidates) quantile of Binomial(n, 1/g) "
    "(Bonferroni over the candidates)"
)
LOG_EXACT_BINOMIAL = (
    "exact: each report hashes with its own random seed (no fixed hash family), so the "
    "support count of a candidate nobody holds is Binomial(n, 1/g) whatever the other "
    "strings' counts; z = threshold / stderr under f = 0"
)
#: Reports read from a report log per chunk (6 MiB of OLH records); the hashing of a chunk
#: against the candidates keeps its own temporaries small (LocalHashing.key_support).
LOG_CHUNK_RECORDS = 1 << 20


def open_domain_statistics(
    oracle: SketchOracle,
    support: NDArray[np.int64],
    n: int,
    candidates: Sequence[str],
    options: ReportOptions,
) -> tuple[ItemColumns, float]:
    """item_statistics of candidate strings estimated from a sketch (estimate_keys), and the
    release threshold of a candidate nobody holds (client/discovery/threshold.py: it holds if
    the most-held string is a candidate). The variance adds the fixed hash family's term
    (SketchOracle.family_variance) with the candidates' estimated counts, clipped at 0:
    values outside the candidates are not in it, so it holds when the heavy values are
    candidates; the clipped noise of the others only makes it larger (conservative)."""
    estimate = oracle.estimate_keys(support, n, item_keys(candidates))
    counts = np.clip(np.rint(estimate), 0, n).astype(np.int64)
    family = oracle.family_variance(counts)

    def variance_of(n: int, frequencies: NDArray[np.float64] | None) -> NDArray[np.float64]:
        f = np.zeros(estimate.size) if frequencies is None else frequencies
        return oracle.variance(n, f) + family

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
    oracle: PureOracle, support: NDArray[np.int64], n: int, options: ReportOptions
) -> tuple[ItemColumns, float]:
    """item_statistics of candidates from their support counts over a report log (Wang et
    al.'s estimate and exact variance, p* = p, q* = 1/g), and the release threshold: the
    exact Binomial(n, q*) quantile at expected_false_discoveries / candidates."""
    threshold = binomial_null_threshold(oracle, n, options.false_flags / support.size)
    estimate = oracle.estimate(support, n)
    stats = estimate_statistics(estimate, oracle.variance, n, options, null_threshold=threshold)
    stats["consistent"] = consistent(OPEN_CONSISTENCY, estimate, n, stats["threshold"])
    return stats, threshold


#: An open-domain state's candidate statistics: (columns, release threshold) of candidates.
CandidateStatistics = Callable[[Sequence[str]], tuple[ItemColumns, float]]


def noise_stderr(oracle: FrequencyOracle, n: int) -> float:
    """The stderr of the reports' noise in the estimate of a candidate nobody holds: an open
    domain's `significance.z` is its release threshold in these units."""
    return math.sqrt(float(oracle.variance(n, np.zeros(1))[0]))


def open_domain_report(
    config: CampaignConfig,
    oracle: SketchOracle | OpenDomainOLH,
    state: StateKey,
    n: int,
    statistics: CandidateStatistics,
    options: ReportOptions,
    candidates: Candidates,
    built_at: float | None = None,
) -> Report:
    """The report of an open-domain state: the candidates whose estimate clears the release
    threshold (and only those), with the threshold and the expected false discoveries;
    `statistics` estimates candidates from the state (a sketch's support vector,
    `open_domain_statistics`, or a report log, `log_statistics`)."""
    count = len(candidates.values)
    report, discovery = _open_head(config, oracle, state, n, options, built_at)
    report["significance"]["z"] = significance_z(max(count, 1), options.false_flags)
    discovery["candidates"], discovery["source"] = count, candidates.source
    if _not_enough(report):
        return report
    if not count:
        report["message"] = (
            "open-domain campaign: no candidates given, so nothing is listed "
            "(ldptel report --candidates FILE)"
        )
        return report
    stats, discovery["threshold"] = statistics(candidates.values)
    report["significance"]["z"] = discovery["threshold"] / noise_stderr(oracle, n)
    if isinstance(oracle, OpenDomainOLH):
        report["significance"]["rule"] = LOG_DISCOVERY_RULE
        report["significance"]["method"] = LOG_EXACT_BINOMIAL
    items = _items(candidates.values, stats)
    report["items"] = [item for item in items if item["significant"]]
    discovery["discovered"] = len(report["items"])
    return report


def _open_head(
    config: CampaignConfig,
    oracle: SketchOracle | OpenDomainOLH | PrefixExtendingMethod,
    state: StateKey,
    n: int,
    options: ReportOptions,
    built_at: float | None,
) -> tuple[Report, Discovery]:
    """The head of an open-domain report and its (empty) discovery section."""
    privacy = privacy_section(config, oracle, n)
    report = _head(config, state, oracle.name, oracle.epsilon, n, options, built_at, privacy)
    report["significance"]["rule"] = DISCOVERY_RULE
    report["significance"]["method"] = EXPECTED_SHORTFALL  # olh's log sets its own (exact)
    report["consistency"] = OPEN_CONSISTENCY
    discovery: Discovery = {
        "max_length": config.max_length or 0,
        "candidates": 0,
        "source": "none",
        "discovered": 0,
        "threshold": 0.0,
        "expected_false_discoveries": options.false_flags,
        "statement": POST_PROCESSING,
    }
    report["discovery"] = discovery
    return report, discovery


def discovery_report(
    config: CampaignConfig,
    pem: PrefixExtendingMethod,
    state: StateKey,
    n: int,
    support: NDArray[np.int64],
    options: ReportOptions,
    built_at: float | None = None,
) -> Report:
    """The report of a "pem" campaign's state: PEM discovery with no candidate list
    (client/discovery/pem.py); the last group's candidates clearing the release threshold
    are listed, estimated as counts among all n users."""
    report, discovery = _open_head(config, pem, state, n, options, built_at)
    discovery["source"] = "pem"
    if _not_enough(report):
        return report
    sketches, sizes = pem.split_support(support)
    if min(sizes) < 1:
        report["status"] = NOT_ENOUGH
        report["message"] = "not enough reports: a PEM group has none, too few for discovery"
        return report
    found = pem.discover(sketches, sizes, options.false_flags)
    # The last group's threshold (scaled back from counts among all n) in its noise stderrs.
    report["significance"]["z"] = (
        found.threshold * sizes[-1] / n / noise_stderr(pem.oracle, sizes[-1])
    )
    discovery["candidates"] = found.candidates
    discovery["threshold"] = found.threshold
    discovery["expected_false_discoveries"] = found.expected_false_discoveries
    z_ci = NormalDist().inv_cdf(0.5 + options.confidence / 2)
    stats: ItemColumns = {
        "estimate": found.estimate,
        "variance": found.stderr**2,
        "stderr": found.stderr,
        "ci_low": found.estimate - z_ci * found.stderr,
        "ci_high": found.estimate + z_ci * found.stderr,
        "consistent": np.clip(found.estimate, 0.0, None),
        "threshold": np.full(found.estimate.size, found.threshold),
        "significant": np.ones(found.estimate.size, dtype=np.bool_),
    }
    report["items"] = _items(found.values, stats)
    discovery["discovered"] = len(report["items"])
    return report


COMBINATION = (
    "per-level unbiased estimates combined with inverse-variance weights (the "
    "minimum-variance unbiased linear combination; weights from each level's f_v-free variance)"
)
ASSUMPTION = "the users of every level share one distribution of values"


def combined_report(
    config: CampaignConfig,
    state: StateKey,
    parts: list[LevelPart],
    levels: list[LevelRow],
    options: ReportOptions,
    built_at: float | None = None,
) -> Report:
    """The estimate of a config with privacy levels, combined over its levels (`parts`, the
    levels with reports); `levels` are the rows of the levels table, weights filled in here."""
    n = sum(part.n for part in parts)
    epsilons = [row["epsilon_used"] for row in levels if row["epsilon_used"] is not None]
    per_level = {part.level: privacy_section(config, part.oracle, part.n) for part in parts}
    privacy: Privacy = {
        "local_epsilon": max(epsilons),
        "reports_per_window": config.reports_per_window,
        "user_epsilon_per_window": max(epsilons) * config.reports_per_window,
        "lifetime_epsilon": config.lifetime_epsilon,
        "central": None,
        "longitudinal": longitudinal(config),
        "levels": per_level,
    }
    # `epsilon` of a combined report: the largest any of its reports used (the weakest).
    report = _head(config, state, config.oracle, max(epsilons), n, options, built_at, privacy)
    combination = combine(parts) if parts else None
    for row in levels:
        weight = None if combination is None else combination.weights.get(row["level"])
        # The weight is the same for every item when the f_v-free variance is (pure oracles).
        row["weight"] = 0.0 if weight is None else float(np.mean(weight))
    report["combined"] = {
        "strategy": config.level_strategy,
        "threshold": config.level_threshold,
        "method": COMBINATION,
        "assumption": ASSUMPTION,
        "levels": levels,
    }
    if not _not_enough(report):
        assert combination is not None  # n >= min_reports >= 1
        stats = estimate_statistics(
            combination.estimate, lambda _n, f: combination.variance(f), n, options
        )
        report["items"] = _items(config.domain, stats)
    return report


def level_reports(
    client: RedisClient,
    registry: Registry,
    name: str,
    config_id: str,
    window: int,
    options: ReportOptions,
    built_at: float | None = None,
) -> list[Report]:
    """A config with privacy levels: the combined report first, then one report per level
    that has reports in the window."""
    config = registry.config(config_id)
    assert config is not None and config.levels
    shards = window_shards(registry, name)
    parts: list[LevelPart] = []
    rows: list[LevelRow] = []
    reports: list[Report] = []
    for level in sorted(config.levels, key=lambda level: (config.levels[level], level)):
        oracle = registry.oracle(config_id, level)
        # Numeric and PEM configs declare no levels.
        assert oracle is None or isinstance(oracle, FrequencyOracle)
        n = 0
        if oracle is not None:  # None: the level does not report (threshold strategy)
            state = StateKey(window, config_id, level)
            n, support = read_state(client, name, shards, state, oracle.support_size)
            if n:
                parts.append(LevelPart(level, oracle, n, oracle.estimate(support, n)))
                reports.append(build_report(config, oracle, state, n, support, options, built_at))
        rows.append(
            {
                "level": level,
                "epsilon": config.levels[level],
                "epsilon_used": None if oracle is None else oracle.epsilon,
                "n": n,
                "weight": 0.0,  # set by combined_report
            }
        )
    state = StateKey(window, config_id, "")
    return [combined_report(config, state, parts, rows, options, built_at), *reports]


TREE_SENTENCE = (
    "Every install's reports of a horizon of {windows} windows were randomized on its device "
    "together at epsilon = {eps:.3g} (memoization tree, local differential privacy): whatever "
    "two value histories of the horizon, its reports are at most e^{eps:.3g} times more "
    "likely under one than under the other."
)


def tree_report(
    client: RedisClient,
    name: str,
    shards: range,
    config: CampaignConfig,
    mechanism: TreeReports,
    state: StateKey,
    n: int,
    support: NDArray[np.int64],
    options: ReportOptions,
    built_at: float | None,
) -> Report:
    """A memoization "tree" config's window: counts from prefix sums (aggregator/tree.py)."""
    privacy = privacy_section(config, mechanism, n)
    # A window's estimate sums reports of up to L windows: the one-window shuffle bound is
    # not claimed for it.
    privacy["central"] = None
    report = _head(config, state, mechanism.name, mechanism.epsilon, n, options, built_at, privacy)
    horizon, t, nodes = prefix_nodes(client, name, shards, config, mechanism, state, support)
    with_tree(report, tree_section(mechanism, horizon, t, nodes))
    if _not_enough(report):
        return report
    counts = tree_counts(mechanism, nodes, n, config.domain_size)
    variance_of = tree_variance(mechanism, t, config.domain_size)
    report["items"] = _items(config.domain, estimate_statistics(counts, variance_of, n, options))
    return report


def window_shards(registry: Registry, name: str) -> range:
    return range(registry.shard_count(name))


def build_window(
    client: RedisClient,
    registry: Registry,
    name: str,
    window: int,
    options: ReportOptions | None = None,
    built_at: float | None = None,
    candidates: Candidates | None = None,
) -> WindowDocument:
    """The window document: one report per (config, level) with state in `window`, and for
    a config with privacy levels their combined report before them; an empty window gives
    "not enough reports" for the campaign's current config. Open-domain configs list the
    `candidates` that clear the release threshold (none without candidates)."""
    options = options or ReportOptions()
    built_at = time.time() if built_at is None else built_at
    shards = window_shards(registry, name)
    states = list_states(client, name, shards, window)
    if not states:
        current = registry.current_config(name)
        if current is None:
            raise ParameterError("campaign", f"unknown campaign {name!r}")
        states = [StateKey(window, current.config_id, "")]
    reports: list[Report] = []
    for config_id in sorted({state.config_id for state in states}):
        config = registry.config(config_id)
        if config is not None and config.levels:
            reports += level_reports(client, registry, name, config_id, window, options, built_at)
            continue
        for state in (s for s in states if s.config_id == config_id):
            oracle = registry.oracle(state.config_id, state.level)
            if config is None or oracle is None:
                continue  # never written: the worker quarantines entries it cannot interpret
            if config.open_domain and not config.discovers:
                reports.append(
                    _candidates_report(
                        client, config, oracle, state, shards, options,
                        candidates or Candidates(), built_at,
                    )
                )  # fmt: skip
                continue
            n, support = read_state(client, name, shards, state, oracle.support_size)
            if isinstance(oracle, TreeReports):
                tree_args = (client, name, shards, config, oracle, state, n, support)
                reports.append(tree_report(*tree_args, options, built_at))
                continue
            if isinstance(oracle, PrefixExtendingMethod):
                if candidates is not None and candidates.values:
                    raise ParameterError(
                        "candidates", f"{name!r} uses pem: it finds its strings without candidates"
                    )
                reports.append(
                    discovery_report(config, oracle, state, n, support, options, built_at)
                )
                continue
            reports.append(build_report(config, oracle, state, n, support, options, built_at))
    seconds = reports[0]["window"]["seconds"] if reports else 0
    return {
        "campaign": name,
        "window": _window(window, seconds),
        "built_at": iso(built_at),
        "reports": reports,
    }


def _candidates_report(
    client: RedisClient,
    config: CampaignConfig,
    oracle: Mechanism,
    state: StateKey,
    shards: range,
    options: ReportOptions,
    candidates: Candidates,
    built_at: float,
) -> Report:
    """The report of an open-domain state estimated for candidates, from whichever form its
    oracle keeps (CampaignConfig allows a sketch or open-domain OLH only)."""
    if isinstance(oracle, ReportLog):
        assert isinstance(oracle, OpenDomainOLH)
        olh = oracle
        log = read_log(client, config.name, shards, state, olh.log_record.itemsize)
        return open_domain_report(
            config, olh, state, log.n,
            lambda values: log_statistics(
                olh, log_candidate_support(olh, log, values), log.n, options
            ),
            options, candidates, built_at,
        )  # fmt: skip
    assert isinstance(oracle, SketchOracle)
    sketch = oracle
    n, support = read_state(client, config.name, shards, state, sketch.support_size)
    return open_domain_report(
        config, sketch, state, n,
        lambda values: open_domain_statistics(sketch, support, n, values, options),
        options, candidates, built_at,
    )  # fmt: skip


def list_windows(client: RedisClient, registry: Registry, name: str) -> list[int]:
    """Start of every window that has state, oldest first."""
    return sorted({s.window for s in list_states(client, name, window_shards(registry, name))})


def store_window(client: RedisClient, document: WindowDocument) -> None:
    """Save a window document where the collector serves it."""
    body = to_json(document).encode()
    stored_reports.save(client, document["campaign"], document["window"]["start_unix"], body)


def load_window(client: RedisClient, name: str, window: int) -> WindowDocument | None:
    """The stored window document (checked against the model), or None."""
    raw = stored_reports.load(client, name, window)
    return None if raw is None else from_json(raw)
