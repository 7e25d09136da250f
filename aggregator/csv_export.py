"""A window document as CSV: one row per (report, item), the counts beside the proportions
(estimate / n, as RAPPOR's results.csv has), for spreadsheets and dataframes.

Numbers are written at full precision (Python's shortest round-trip repr), so every count in
the CSV equals the JSON report's; a proportion is that count divided by the report's n.
Reports without items (not enough reports) have no rows."""

from __future__ import annotations

import csv
import io

from ldptel.aggregator.model import Item, Report, WindowDocument

#: The header, in order: which report, which item, its counts, then its proportions.
CSV_COLUMNS = (
    "campaign", "window_start", "config_id", "level", "combined", "oracle", "epsilon", "n",
    "confidence", "item", "index", "estimate", "stderr", "ci_low", "ci_high", "consistent",
    "significant", "proportion", "proportion_stderr", "proportion_ci_low",
    "proportion_ci_high",
)  # fmt: skip


def _flag(value: bool) -> str:
    return "true" if value else "false"


def csv_row(report: Report, item: Item) -> list[object]:
    """One item of one report; the proportions are the counts over the report's n."""
    n = report["n"]
    counts = (item["estimate"], item["stderr"], item["ci_low"], item["ci_high"])
    return [
        report["campaign"], report["window"]["start"], report["config_id"], report["level"],
        _flag("combined" in report), report["oracle"], report["epsilon"], n,
        report["confidence"], item["item"], item["index"], *counts, item["consistent"],
        _flag(item["significant"]), *(count / n for count in counts),
    ]  # fmt: skip


def render_csv(document: WindowDocument) -> str:
    """Every item of every report of the window, largest estimate first within a report."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for report in document["reports"]:
        for item in sorted(report["items"], key=lambda i: -i["estimate"]):
            writer.writerow(csv_row(report, item))
    return out.getvalue()
