"""The window document of a campaign: one report per (config, level) with state in the
window, each built by the builder of its config's kind, and its storage where the collector
serves it. A new kind of campaign is one builder module and one entry in BUILDERS."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ldptel.aggregator.model import Report, WindowDocument, from_json, to_json
from ldptel.aggregator.reports import (
    breakdown,
    categorical,
    discovery,
    levels,
    numeric,
    open_domain,
    tree,
)
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import window_section
from ldptel.aggregator.reports.options import Candidates, ReportOptions
from ldptel.aggregator.state import StateKey, list_states
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.memoization import MEMO_TREE
from ldptel.store import reports as stored_reports
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry
from ldptel.store.reports import iso

#: The reports of one config's states in a window.
Builder = Callable[[ReportContext, CampaignConfig, Sequence[StateKey]], list[Report]]
#: One builder per kind of campaign (report_kind).
BUILDERS: dict[str, Builder] = {
    "categorical": categorical.build,
    "levels": levels.build,
    "open_domain": open_domain.build,
    "discovery": discovery.build,
    "numeric": numeric.build,
    "tree": tree.build,
    "breakdown": breakdown.build,
}


def report_kind(config: CampaignConfig) -> str:
    """Which builder reports a config's states: a key of BUILDERS (its kind's tag, unless
    its levels or its memoization "tree" shape the report)."""
    if config.levels:
        return "levels"
    if config.memoization == MEMO_TREE:
        return "tree"
    return config.kind.tag


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
    context = ReportContext(
        client, registry, name, window, options or ReportOptions(),
        time.time() if built_at is None else built_at, candidates,
    )  # fmt: skip
    states = list_states(client, name, context.shards, window)
    if not states:
        current = registry.current_config(name)
        if current is None:
            raise ParameterError("campaign", f"unknown campaign {name!r}")
        states = [StateKey(window, current.config_id, "")]
    reports: list[Report] = []
    for config_id in sorted({state.config_id for state in states}):
        config = registry.config(config_id)
        if config is None:
            continue  # never written: the worker quarantines entries it cannot interpret
        own = [state for state in states if state.config_id == config_id]
        reports += BUILDERS[report_kind(config)](context, config, own)
    seconds = reports[0]["window"]["seconds"] if reports else 0
    return {
        "campaign": name,
        "window": window_section(window, seconds),
        "built_at": iso(context.built_at),
        "reports": reports,
    }


def list_windows(client: RedisClient, registry: Registry, name: str) -> list[int]:
    """Start of every window that has state, oldest first."""
    shards = range(registry.shard_count(name))
    return sorted({state.window for state in list_states(client, name, shards)})


def store_window(client: RedisClient, document: WindowDocument) -> None:
    """Save a window document where the collector serves it."""
    body = to_json(document).encode()
    stored_reports.save(client, document["campaign"], document["window"]["start_unix"], body)


def load_window(client: RedisClient, name: str, window: int) -> WindowDocument | None:
    """The stored window document (checked against the model), or None."""
    raw = stored_reports.load(client, name, window)
    return None if raw is None else from_json(raw)
