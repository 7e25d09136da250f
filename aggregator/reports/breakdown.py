"""The report of a breakdown state: every one-way and two-way marginal, each cell unbiased
with its exact variance and interval (client/multi/mechanisms.py), and consistent counts by
post-processing beside them (client/multi/consistency.py: biased, like Norm-Sub)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import BreakdownCell, BreakdownMarginal, BreakdownSection, Report
from ldptel.aggregator.privacy import privacy_section
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import head, mark_not_enough
from ldptel.aggregator.reports.statistics import confidence_interval
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig
from ldptel.client.multi import Breakdown, Marginal, make_consistent
from ldptel.client.multi.wire import BreakdownReports

CONSISTENCY = (
    "consistent: the unbiased cells post-processed to be non-negative, sum to n and agree on "
    "shared attributes (PriView's consistency step with Norm-Sub; client/multi/consistency.py); "
    "biased, and its variance is not the stated one: estimate, stderr and the interval are "
    "the numbers of record"
)


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """One report per state of a breakdown campaign (breakdowns declare no levels)."""
    reports = []
    for state, mechanism, n, support in context.counted(states, BreakdownReports):
        privacy = privacy_section(config, mechanism, n)
        report = head(
            config, state, config.oracle, mechanism.epsilon, n, context.options,
            context.built_at, privacy,
        )  # fmt: skip
        if not mark_not_enough(report):
            confidence = context.options.confidence
            report["breakdown"] = breakdown_section(mechanism.breakdown, support, confidence)
        reports.append(report)
    return reports


def breakdown_section(
    breakdown: Breakdown, state: NDArray[np.int64], confidence: float
) -> BreakdownSection:
    """Every one-way marginal, then every two-way one, from a window's state."""
    attributes = breakdown.attributes
    positions: list[tuple[int, ...]] = [(a,) for a in range(len(attributes.names))]
    positions += attributes.pairs
    marginals = [breakdown.marginal(state, which) for which in positions]
    consistent = make_consistent(marginals).counts
    return {
        "mechanism": breakdown.name,
        "attributes": {
            name: list(labels)
            for name, labels in zip(attributes.names, attributes.labels, strict=True)
        },
        "marginals": [
            _marginal(m, c.tolist(), breakdown, confidence)
            for m, c in zip(marginals, consistent, strict=True)
        ],
        "consistency": CONSISTENCY,
    }


def _marginal(
    marginal: Marginal, consistent: list[float], breakdown: Breakdown, confidence: float
) -> BreakdownMarginal:
    attributes = breakdown.attributes
    labels = [attributes.labels[attributes.names.index(name)] for name in marginal.attributes]
    low, high = confidence_interval(marginal.estimate, marginal.stderr, confidence)
    rows = zip(
        itertools.product(*labels),
        marginal.estimate.tolist(),
        marginal.variance.tolist(),
        marginal.stderr.tolist(),
        low.tolist(),
        high.tolist(),
        consistent,
        strict=True,
    )
    cells: list[BreakdownCell] = [
        {
            "values": list(values),
            "estimate": estimate,
            "variance": variance,
            "stderr": stderr,
            "ci_low": ci_low,
            "ci_high": ci_high,
            "consistent": fixed,
        }
        for values, estimate, variance, stderr, ci_low, ci_high, fixed in rows
    ]
    return {"attributes": list(marginal.attributes), "cells": cells}
