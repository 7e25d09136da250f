"""The reports of a config with privacy levels: each level's own report, and before them
the estimate combined over the levels with inverse-variance weights (client/levels.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ldptel.aggregator.model import LevelRow, Privacy, Report
from ldptel.aggregator.privacy import longitudinal, privacy_section
from ldptel.aggregator.reports.categorical import build_report
from ldptel.aggregator.reports.context import ReportContext
from ldptel.aggregator.reports.document import head, items_of, mark_not_enough
from ldptel.aggregator.reports.options import ReportOptions
from ldptel.aggregator.reports.statistics import estimate_statistics
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig
from ldptel.client.levels import LevelPart, combine
from ldptel.client.oracles import FrequencyOracle

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
    report = head(config, state, config.oracle, max(epsilons), n, options, built_at, privacy)
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
    if not mark_not_enough(report):
        assert combination is not None  # n >= min_reports >= 1
        stats = estimate_statistics(
            combination.estimate, lambda _n, f: combination.variance(f), n, options
        )
        report["items"] = items_of(config.domain, stats)
    return report


def build(
    context: ReportContext, config: CampaignConfig, states: Sequence[StateKey]
) -> list[Report]:
    """A config with privacy levels: the combined report first, then one report per level
    that has reports in the window (every declared level is looked up, not only `states`)."""
    assert config.levels
    # The states' config id: a stored legacy id need not be config.config_id.
    config_id, window = states[0].config_id, context.window
    options, built_at = context.options, context.built_at
    parts: list[LevelPart] = []
    rows: list[LevelRow] = []
    reports: list[Report] = []
    for level in sorted(config.levels, key=lambda level: (config.levels[level], level)):
        oracle = context.registry.oracle(config_id, level)
        # Numeric and PEM configs declare no levels.
        assert oracle is None or isinstance(oracle, FrequencyOracle)
        n = 0
        if oracle is not None:  # None: the level does not report (threshold strategy)
            state = StateKey(window, config_id, level)
            n, support = context.read(state, oracle.support_size)
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
