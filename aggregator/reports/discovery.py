"""The report of a "pem" state: Prefix Extending Method discovery with no candidate list
(client/discovery/pem.py); the last group's candidates clearing the release threshold are
listed, estimated as counts among all n users."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import Report
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import items_of, mark_not_enough
from ldptel.aggregator.reports.open_domain import open_head
from ldptel.aggregator.reports.options import NOT_ENOUGH, ReportOptions
from ldptel.aggregator.reports.statistics import ItemColumns, confidence_interval, noise_stderr
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.errors import ParameterError


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
    report, discovery = open_head(config, pem, state, n, options, built_at)
    discovery["source"] = "pem"
    if mark_not_enough(report):
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
    ci_low, ci_high = confidence_interval(found.estimate, found.stderr, options.confidence)
    stats: ItemColumns = {
        "estimate": found.estimate,
        "variance": found.stderr**2,
        "stderr": found.stderr,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "consistent": np.clip(found.estimate, 0.0, None),
        "threshold": np.full(found.estimate.size, found.threshold),
        "significant": np.ones(found.estimate.size, dtype=np.bool_),
    }
    report["items"] = items_of(found.values, stats)
    discovery["discovered"] = len(report["items"])
    return report


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """One discovery report per state of a "pem" campaign (it takes no candidates)."""
    if context.candidates is not None and context.candidates.values:
        raise ParameterError(
            "candidates", f"{config.name!r} uses pem: it finds its strings without candidates"
        )
    return [
        discovery_report(config, pem, state, n, support, context.options, context.built_at)
        for state, pem, n, support in context.counted(states, PrefixExtendingMethod)
    ]
