"""Reports as plain-text tables for people (the CLI and the demo)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from ldptel.aggregator.report import NOT_ENOUGH, privacy_sentences


def _number(value: float) -> str:
    return f"{value:,.0f}"


def format_report(report: dict[str, Any], true_counts: Sequence[int] | None = None) -> str:
    """One report: a header, the privacy guarantee in words, and the items by estimate."""
    window = report["window"]
    lines = [
        f"campaign {report['campaign']}  config {report['config_id']}"
        + (f"  level {report['level']}" if report["level"] else ""),
        f"window {window['start']} .. {window['end']}  n = {report['n']:,}  "
        f"oracle {report['oracle']}  epsilon {report['epsilon']:.3g}  built {report['built_at']}",
    ]
    for sentence in privacy_sentences(report):
        lines += textwrap.wrap(sentence, 96, initial_indent="  ", subsequent_indent="  ")
    if report["status"] == NOT_ENOUGH:
        return "\n".join([*lines, "", report["message"]])
    confidence = f"{report['confidence']:.0%} CI"
    header = ["item", "estimate", "stderr", confidence, report["consistency"], "signif."]
    if true_counts is not None:
        header.append("true")
    rows = []
    for item in sorted(report["items"], key=lambda i: -i["estimate"]):
        row = [
            str(item["item"]),
            _number(item["estimate"]),
            _number(item["stderr"]),
            f"[{_number(item['ci_low'])}, {_number(item['ci_high'])}]",
            _number(item["consistent"]),
            "*" if item["significant"] else "",
        ]
        if true_counts is not None:
            row.append(_number(true_counts[item["index"]]))
        rows.append(row)
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for number, row in enumerate([header, *rows]):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append(("" if number else "\n") + "  ".join(cells).rstrip())
    flagged = sum(item["significant"] for item in report["items"])
    lines.append(
        f"\n* {flagged} of {len(report['items'])} items significantly above zero "
        f"(z = {report['significance']['z']:.2f}; expected false flags over the domain "
        f"< {report['significance']['expected_false_flags']:g})."
    )
    return "\n".join(lines)


def format_window(document: dict[str, Any], true_counts: Sequence[int] | None = None) -> str:
    """Every report of a window document, separated by blank lines."""
    parts = [format_report(report, true_counts) for report in document["reports"]]
    return "\n\n".join(parts) if parts else f"no reports for window {document['window']['start']}"
