"""The parts every window report shares: its window, its head (campaign, config, oracle,
epsilon, n, status, privacy, significance rule), the "not enough reports" status and the
rows of its items."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ldptel.aggregator.consistency import ALIASES
from ldptel.aggregator.model import Item, Privacy, Report, Window
from ldptel.aggregator.reports.options import NOT_ENOUGH, OK, ReportOptions
from ldptel.aggregator.reports.statistics import ItemColumns, significance_z
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import CampaignConfig
from ldptel.store.reports import iso

#: How the significance threshold was set (report["significance"]["method"]).
NORMAL = "normal approximation: z = the (1 - expected_false_flags / d) normal quantile"


def window_section(start: int, seconds: int) -> Window:
    return {
        "start": iso(start),
        "end": iso(start + seconds),
        "start_unix": start,
        "seconds": seconds,
    }


def head(
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
        "window": window_section(state.window, config.window_seconds),
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


def mark_not_enough(report: Report) -> bool:
    """Mark a report with too few reports; True if it was."""
    if report["n"] >= report["min_reports"]:
        return False
    report["status"] = NOT_ENOUGH
    report["message"] = (
        f"not enough reports: n = {report['n']} < {report['min_reports']}, too few for estimates"
    )
    return True


def items_of(labels: Sequence[str], stats: ItemColumns) -> list[Item]:
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
