"""The window report of a memoization "tree" config (ldptel.client.tree): each label's count
from prefix sums over the horizon's dyadic tree, with its exact variance and CI.

A window's state is the per-node sums of the node of its read level (a tree report carries
its bit only there: `TreeShape.read_level`); so window t's estimate sums the states of the
windows where the nodes of [0, t]'s decomposition end, at most floor(log2 T) + 1 of them
(t's own included), never the whole horizon: a new window reads O(log T) small states.
Assumed, as every estimate here: the installs that report in window t (n) are those whose
changes the nodes hold (a stable population over the horizon; an install joining mid-horizon
counts from its first report, its earlier windows holding no change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import Report, TreeNode, TreeSection
from ldptel.aggregator.state import StateKey, read_state
from ldptel.client.campaign import CampaignConfig
from ldptel.client.memoization import MEMO_TREE
from ldptel.client.tree_wire import TreeReports
from ldptel.store.connection import RedisClient

METHOD = (
    "count = items * K * L / c * (sum of the +-1 bits of the prefix's nodes), c = (e^eps - 1) "
    "/ (e^eps + 1); variance = n * (items * K^2 * L * nodes / c^2 - f) (Erlingsson et al., "
    "SODA 2019, Sec. 3), f the tracked frequency (estimated, clipped to [0, 1])"
)
PAST_MAX_CHANGES = (
    "an install past max_changes changes in a horizon is counted at the value of its "
    "max_changes-th change: its later changes are not reported (a bias, no privacy loss)"
)


def horizon_end(config: CampaignConfig, window: int) -> int:
    """When the horizon holding `window` ends (unix seconds); the window's own end for a
    config that is not memoization "tree" (`ldptel aggregator prune` keeps a tree state
    until its horizon is over: later windows of it read its node)."""
    seconds = config.window_seconds
    if config.memoization != MEMO_TREE:
        return window + seconds
    horizon = config.tree_shape().horizon_windows
    assert horizon is not None
    span = horizon * seconds
    return (window // span + 1) * span


def prefix_nodes(
    client: RedisClient,
    name: str,
    shards: Iterable[int],
    config: CampaignConfig,
    mechanism: TreeReports,
    state: StateKey,
    support: NDArray[np.int64],
) -> tuple[int, int, list[TreeNode]]:
    """(horizon, t, the nodes of [0, t] with their sums): each node's sums from the state of
    the window where it ends (this window's own support for the last)."""
    shape, seconds = mechanism.shape, config.window_seconds
    horizon, t = divmod(state.window // seconds, shape.horizon_windows)
    shards = list(shards)
    nodes: list[TreeNode] = []
    for level, start in shape.decomposition(t):
        end = start + (1 << level) - 1
        if end == t:
            found = support
        else:
            window = (horizon * shape.horizon_windows + end) * seconds
            key = StateKey(window, state.config_id, state.level)
            found = read_state(client, name, shards, key, mechanism.support_size)[1]
        sums = [mechanism.node_sum(found, item, level) for item in range(shape.items)]
        nodes.append({"level": level, "start": start, "sums": sums})
    return horizon, t, nodes


def tree_counts(
    mechanism: TreeReports, nodes: list[TreeNode], n: int, domain_size: int
) -> NDArray[np.float64]:
    """Each label's count estimate (a binary campaign tracks label 1; label 0 is n minus it)."""
    shape = mechanism.shape
    tracked = np.array(
        [shape.scale * sum(node["sums"][item] for node in nodes) for item in range(shape.items)]
    )
    if shape.items == 1 and domain_size == 2:
        return np.array([n - tracked[0], tracked[0]])
    return tracked


VarianceOf = Callable[[int, NDArray[np.float64] | None], NDArray[np.float64]]


def tree_variance(mechanism: TreeReports, t: int, domain_size: int) -> VarianceOf:
    """variance_of(n, frequencies) of the counts (estimate_statistics' form): n times the
    per-install variance, with each tracked indicator's frequency (None: 0, the null)."""
    shape = mechanism.shape

    def variance_of(n: int, frequencies: NDArray[np.float64] | None) -> NDArray[np.float64]:
        per_install = shape.variance(t, 1, 0.0)
        if frequencies is None:
            return np.full(domain_size, n * per_install)
        tracked = frequencies
        if shape.items == 1 and domain_size == 2:  # label 1's indicator, for both labels
            tracked = np.array([1.0 - frequencies[0], frequencies[1]])
        return np.asarray(n * (per_install - tracked), dtype=np.float64)

    return variance_of


def tree_section(
    mechanism: TreeReports, horizon: int, t: int, nodes: list[TreeNode]
) -> TreeSection:
    shape = mechanism.shape
    return {
        "horizon": horizon,
        "window_index": t,
        "horizon_windows": shape.horizon_windows,
        "max_changes": shape.max_changes,
        "levels": shape.levels,
        "nodes": nodes,
        "method": METHOD,
        "past_max_changes": PAST_MAX_CHANGES,
    }


def with_tree(report: Report, section: TreeSection) -> Report:
    report["tree"] = section
    return report
