"""The report of a numeric state: the mean with its exact stderr and interval, and for the
distribution mechanisms the histogram, CDF and quantiles (ldptel.aggregator.numeric)."""

from __future__ import annotations

from collections.abc import Sequence

from ldptel.aggregator.model import Report
from ldptel.aggregator.numeric import numeric_estimates
from ldptel.aggregator.privacy import privacy_section
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import head, mark_not_enough
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig
from ldptel.client.numeric import NumericMechanism


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """One report per state of a numeric campaign (numeric configs declare no levels)."""
    reports = []
    counted = context.counted(states, NumericMechanism)  # type: ignore[type-abstract]
    for state, mechanism, n, support in counted:
        privacy = privacy_section(config, mechanism, n)
        report = head(
            config, state, mechanism.name, mechanism.epsilon, n, context.options,
            context.built_at, privacy,
        )  # fmt: skip
        if not mark_not_enough(report):
            report["numeric"] = numeric_estimates(mechanism, support, n, context.options.confidence)
        reports.append(report)
    return reports
