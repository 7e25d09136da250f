"""The report of an open-domain state estimated for candidate strings: only the candidates
whose estimate clears the release threshold are listed, with the threshold and the expected
false discoveries (client/discovery/threshold.py; the state a sketch or an OLH report log)."""

from __future__ import annotations

from collections.abc import Sequence

from ldptel.aggregator.model import Discovery, Report
from ldptel.aggregator.privacy import privacy_section
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import head, items_of, mark_not_enough
from ldptel.aggregator.reports.options import Candidates, ReportOptions
from ldptel.aggregator.reports.statistics import (
    OPEN_CONSISTENCY,
    CandidateStatistics,
    log_candidate_support,
    log_statistics,
    noise_stderr,
    open_domain_statistics,
    significance_z,
)
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.oracles.base import ReportLog
from ldptel.client.oracles.olh import OpenDomainOLH
from ldptel.client.oracles.sketch import KeySketch

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


def open_domain_report(
    config: CampaignConfig,
    oracle: KeySketch | OpenDomainOLH,
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
    report, discovery = open_head(config, oracle, state, n, options, built_at)
    values = sendable(config, candidates.values)
    if len(values) < len(candidates.values):
        discovery["too_long"] = len(candidates.values) - len(values)
    count = len(values)
    report["significance"]["z"] = significance_z(max(count, 1), options.false_flags)
    discovery["candidates"], discovery["source"] = count, candidates.source
    if mark_not_enough(report):
        return report
    if not count:
        report["message"] = (
            "open-domain campaign: no candidates given, so nothing is listed "
            "(ldptel aggregator candidates NAME FILE, or ldptel report --candidates FILE)"
        )
        return report
    stats, discovery["threshold"] = statistics(values)
    report["significance"]["z"] = discovery["threshold"] / noise_stderr(oracle, n)
    if isinstance(oracle, OpenDomainOLH):
        report["significance"]["rule"] = LOG_DISCOVERY_RULE
        report["significance"]["method"] = LOG_EXACT_BINOMIAL
    items = items_of(values, stats)
    report["items"] = [item for item in items if item["significant"]]
    discovery["discovered"] = len(report["items"])
    return report


def sendable(config: CampaignConfig, values: Sequence[str]) -> tuple[str, ...]:
    """The candidates a client can send: at most max_length UTF-8 bytes (CampaignConfig
    .open_value refuses longer values on the device)."""
    limit = config.max_length or 0
    return tuple(value for value in values if len(value.encode()) <= limit)


def open_head(
    config: CampaignConfig,
    oracle: KeySketch | OpenDomainOLH | PrefixExtendingMethod,
    state: StateKey,
    n: int,
    options: ReportOptions,
    built_at: float | None,
) -> tuple[Report, Discovery]:
    """The head of an open-domain report and its (empty) discovery section."""
    privacy = privacy_section(config, oracle, n)
    report = head(config, state, oracle.name, oracle.epsilon, n, options, built_at, privacy)
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


def candidates_report(
    context: ReportContext, config: CampaignConfig, oracle: Mechanism, state: StateKey
) -> Report:
    """The report of an open-domain state estimated for candidates, from whichever form its
    key mechanism keeps (OpenDomain.build: a sketch, or OLH's report log)."""
    options, candidates = context.options, context.dictionary()
    if isinstance(oracle, ReportLog):
        assert isinstance(oracle, OpenDomainOLH)
        olh = oracle
        log = context.read_log(state, olh.log_record.itemsize)
        return open_domain_report(
            config, olh, state, log.n,
            lambda values: log_statistics(
                olh, log_candidate_support(olh, log, values), log.n, options
            ),
            options, candidates, context.built_at,
        )  # fmt: skip
    assert isinstance(oracle, KeySketch)
    sketch = oracle
    n, support = context.read(state, sketch.support_size)
    return open_domain_report(
        config, sketch, state, n,
        lambda values: open_domain_statistics(sketch, support, n, values, options),
        options, candidates, context.built_at,
    )  # fmt: skip


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """One report per state of an open-domain campaign with candidates (not discovery)."""
    reports = []
    for state in states:
        oracle = context.registry.oracle(state.config_id, state.level)
        if oracle is not None:  # None: never written (the worker quarantines its entries)
            reports.append(candidates_report(context, config, oracle, state))
    return reports
