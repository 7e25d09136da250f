"""Reports as plain-text tables for people (the CLI and the demo)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ldptel.aggregator.csv_export import ATTRIBUTE_JOIN, VALUE_JOIN
from ldptel.aggregator.model import (
    BreakdownSection,
    Bucket,
    LevelRow,
    Numeric,
    Report,
    WindowDocument,
)
from ldptel.aggregator.reports import NOT_ENOUGH, privacy_sentences

#: Rows of a distribution's histogram in a table (adjacent buckets merged to fit).
TABLE_BUCKETS = 16


def count_text(value: float) -> str:
    """A count for people: whole users, with thousands separators."""
    return f"{value:,.0f}"


def value_text(value: float) -> str:
    """A number in a numeric campaign's units (4 significant digits)."""
    return f"{value:,.4g}"


def merged_buckets(buckets: list[Bucket], rows: int) -> list[tuple[float, float, float, float]]:
    """(low, high, probability, cdf) of at most `rows` runs of adjacent buckets."""
    size = -(-len(buckets) // rows)
    runs = [buckets[i : i + size] for i in range(0, len(buckets), size)]
    return [
        (run[0]["low"], run[-1]["high"], sum(b["probability"] for b in run), run[-1]["cdf"])
        for run in runs
    ]


def numeric_lines(report: Report, numeric: Numeric) -> list[str]:
    """A numeric report's mean with its CI and, for distribution mechanisms, a histogram
    (adjacent buckets merged into at most TABLE_BUCKETS rows) and quantiles."""
    mean = numeric["mean"]
    confidence = f"{report['confidence']:.0%} CI"
    bounds = f"[{value_text(numeric['low'])}, {value_text(numeric['high'])}]"
    lines = [
        f"range {bounds} ({numeric['clipping']})",
        "",
        *aligned(
            [
                ["", "estimate", "stderr", confidence, "worst-case stderr"],
                [
                    "mean",
                    value_text(mean["estimate"]),
                    value_text(mean["stderr"]),
                    f"[{value_text(mean['ci_low'])}, {value_text(mean['ci_high'])}]",
                    value_text(mean["worst_case_stderr"]),
                ],
            ]
        ),
    ]
    distribution = numeric.get("distribution")
    if distribution is None:
        return lines
    rows = [["bucket", "probability", "cdf"]] + [
        [f"[{value_text(low)}, {value_text(high)})", f"{p:.4f}", f"{cdf:.4f}"]
        for low, high, p, cdf in merged_buckets(distribution["buckets"], TABLE_BUCKETS)
    ]
    quantiles = "  ".join(
        f"q{q['q']:g} {value_text(q['value'])}" for q in distribution["quantiles"]
    )
    return [*lines, "", *aligned(rows), "", f"quantiles: {quantiles}"]


def breakdown_lines(report: Report, section: BreakdownSection) -> list[str]:
    """Every marginal of a breakdown report as a table of its cells (estimate, stderr, CI,
    consistent), then what the consistent column is."""
    confidence = f"{report['confidence']:.0%} CI"
    lines = []
    for marginal in section["marginals"]:
        header = [ATTRIBUTE_JOIN.join(marginal["attributes"]), "estimate", "stderr", confidence]
        rows = [
            [
                VALUE_JOIN.join(cell["values"]),
                count_text(cell["estimate"]),
                count_text(cell["stderr"]),
                f"[{count_text(cell['ci_low'])}, {count_text(cell['ci_high'])}]",
                count_text(cell["consistent"]),
            ]
            for cell in marginal["cells"]
        ]
        lines += ["", *aligned([[*header, "consistent"], *rows])]
    wrapped = textwrap.wrap(section["consistency"], 96, initial_indent="* ")
    return [*lines, "", *wrapped]


def levels_table(rows: list[LevelRow]) -> list[str]:
    """The privacy levels of a combined report as aligned lines."""
    table = [["level", "epsilon", "epsilon used", "reports", "weight"]] + [
        [
            row["level"],
            f"{row['epsilon']:.3g}",
            "does not report" if row["epsilon_used"] is None else f"{row['epsilon_used']:.3g}",
            f"{row['n']:,}",
            f"{row['weight']:.3f}",
        ]
        for row in rows
    ]
    return aligned(table)


def aligned(table: list[list[str]]) -> list[str]:
    """Rows of cells as lines: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]
    return [
        "  ".join(
            [row[0].ljust(widths[0])]
            + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        ).rstrip()
        for row in table
    ]


def format_report(report: Report, true_counts: Sequence[int] | None = None) -> str:
    """One report: a header, the privacy guarantee in words, and the items by estimate."""
    window = report["window"]
    combined = report.get("combined")
    epsilon = (
        f"combined over privacy levels ({combined['strategy']})"
        if combined
        else f"epsilon {report['epsilon']:.3g}"
    )
    lines = [
        f"campaign {report['campaign']}  config {report['config_id']}"
        + (f"  level {report['level']}" if report["level"] else ""),
        f"window {window['start']} .. {window['end']}  n = {report['n']:,}  "
        f"oracle {report['oracle']}  {epsilon}  built {report['built_at']}",
    ]
    for sentence in privacy_sentences(report):
        lines += textwrap.wrap(sentence, 96, initial_indent="  ", subsequent_indent="  ")
    if combined:
        lines += ["", *levels_table(combined["levels"])]
    if report["status"] == NOT_ENOUGH:
        return "\n".join([*lines, "", report["message"]])
    if "numeric" in report:
        return "\n".join([*lines, "", *numeric_lines(report, report["numeric"])])
    if "breakdown" in report:
        return "\n".join([*lines, *breakdown_lines(report, report["breakdown"])])
    confidence = f"{report['confidence']:.0%} CI"
    header = ["item", "estimate", "stderr", confidence, report["consistency"], "signif."]
    if true_counts is not None:
        header.append("true")
    rows = []
    for item in sorted(report["items"], key=lambda i: -i["estimate"]):
        row = [
            str(item["item"]),
            count_text(item["estimate"]),
            count_text(item["stderr"]),
            f"[{count_text(item['ci_low'])}, {count_text(item['ci_high'])}]",
            count_text(item["consistent"]),
            "*" if item["significant"] else "",
        ]
        if true_counts is not None:
            row.append(count_text(true_counts[item["index"]]))
        rows.append(row)
    first, *rest = aligned([header, *rows])
    lines += ["\n" + first, *rest]
    discovery = report.get("discovery")
    if discovery:
        lines += ["", *textwrap.wrap(discovery_sentence(report), 96)]
        lines += textwrap.wrap(discovery["statement"], 96)
        return "\n".join(lines)
    flagged = sum(item["significant"] for item in report["items"])
    lines.append(
        f"\n* {flagged} of {len(report['items'])} items significantly above zero "
        f"(z = {report['significance']['z']:.2f}; expected false flags over the domain "
        f"< {report['significance']['expected_false_flags']:g})."
    )
    if "uncalibrated" in report:
        lines.append(f"Note: {report['uncalibrated']}.")
    return "\n".join(lines)


def discovery_sentence(report: Report) -> str:
    """What an open-domain report lists and its release threshold, in one sentence."""
    discovery = report["discovery"]
    dropped = discovery.get("too_long", 0)
    dropped_text = (
        f" {dropped:,} given candidates longer than max_length {discovery['max_length']} bytes "
        "were dropped: no client can send them."
        if dropped
        else ""
    )
    if not discovery["candidates"]:
        return report["message"] + dropped_text
    return (
        f"{discovery['discovered']} of {discovery['candidates']:,} candidates "
        f"({discovery['source']}) discovered: estimate above the release threshold "
        f"{discovery['threshold']:,.0f} ({report['significance']['z']:.2f} times the stderr of "
        "the reports' noise for a candidate nobody holds); expected false discoveries "
        f"over the candidates <= {discovery['expected_false_discoveries']:g}. Candidates below "
        "it are not listed." + dropped_text
    )


def format_window(document: WindowDocument, true_counts: Sequence[int] | None = None) -> str:
    """Every report of a window document, separated by blank lines."""
    parts = [format_report(report, true_counts) for report in document["reports"]]
    return "\n\n".join(parts) if parts else f"no reports for window {document['window']['start']}"
