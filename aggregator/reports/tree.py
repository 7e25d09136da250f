"""The report of a memoization "tree" config's window: each item's count from prefix sums
over the dyadic tree of the horizon's windows (aggregator/tree.py; Erlingsson et al., SODA
2019), with its exact variance and interval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import Report
from ldptel.aggregator.privacy import privacy_section
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import head, items_of, mark_not_enough
from ldptel.aggregator.reports.options import ReportOptions
from ldptel.aggregator.reports.statistics import estimate_statistics
from ldptel.aggregator.state import StateKey
from ldptel.aggregator.tree import prefix_nodes, tree_counts, tree_section, tree_variance, with_tree
from ldptel.client.campaign import CampaignConfig
from ldptel.client.tree_wire import TreeReports
from ldptel.store.connection import RedisClient


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
    report = head(config, state, mechanism.name, mechanism.epsilon, n, options, built_at, privacy)
    horizon, t, nodes = prefix_nodes(client, name, shards, config, mechanism, state, support)
    with_tree(report, tree_section(mechanism, horizon, t, nodes))
    if mark_not_enough(report):
        return report
    counts = tree_counts(mechanism, nodes, n, config.domain_size)
    variance_of = tree_variance(mechanism, t, config.domain_size)
    report["items"] = items_of(config.domain, estimate_statistics(counts, variance_of, n, options))
    return report


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """One report per state of a memoization "tree" config."""
    return [
        tree_report(
            context.client,
            context.name,
            context.shards,
            config,
            mechanism,
            state,
            n,
            support,
            context.options,
            context.built_at,
        )
        for state, mechanism, n, support in context.counted(states, TreeReports)
    ]
