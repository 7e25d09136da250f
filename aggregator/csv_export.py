"""A window document as CSV: one row per (report, item), the counts beside the proportions
(estimate / n, as RAPPOR's results.csv has), for spreadsheets and dataframes.

Numbers are written at full precision (Python's shortest round-trip repr), so every count in
the CSV equals the JSON report's; a proportion is that count divided by the report's n.
Reports without items (not enough reports) have no rows.

A numeric campaign's document (reports with a `numeric` section) is written with its own
header, NUMERIC_CSV_COLUMNS: per report one `mean` row, then one `bucket` row per bucket of
the distribution (sw, dbitflip); the columns a row's kind lacks are empty.

A breakdown campaign's document (reports with a `breakdown` section) has BREAKDOWN_CSV_COLUMNS:
one row per cell of every marginal, `attributes` naming the marginal ("os x plan") and
`values` the cell's labels ("ios | pro").

Every CSV the project writes (this module's, the dashboard's downloads) goes through
`write_csv`, which neutralises formula cells: an item is free text that app users chose."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence

from ldptel.aggregator.model import Item, Report, WindowDocument

#: The header, in order: which report, which item, its counts, then its proportions.
CSV_COLUMNS = (
    "campaign", "window_start", "config_id", "level", "combined", "oracle", "epsilon", "n",
    "confidence", "item", "index", "estimate", "stderr", "ci_low", "ci_high", "consistent",
    "significant", "proportion", "proportion_stderr", "proportion_ci_low",
    "proportion_ci_high",
)  # fmt: skip


#: Which report (as above), its range, the row's kind ("mean" or "bucket"), the mean's
#: numbers (mean rows), then the bucket's (bucket rows).
NUMERIC_CSV_COLUMNS = (
    "campaign", "window_start", "config_id", "level", "combined", "oracle", "epsilon", "n",
    "confidence", "range_low", "range_high", "row", "estimate", "stderr", "ci_low", "ci_high",
    "worst_case_stderr", "bucket_low", "bucket_high", "point", "probability", "raw", "cdf",
)  # fmt: skip


#: A text cell starting with one of these is run by a spreadsheet as a formula (OWASP,
#: "CSV Injection": prefix such a cell with a single quote, which the spreadsheet hides).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: A plain decimal number (a negative one included): a spreadsheet reads it as a number.
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_cell(value: object) -> object:
    """A cell as written: None empty, numbers as they are, text that would start a formula
    behind a single quote (`-2` stays a number; `-2+3` is a formula and is quoted)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return value if _NUMBER.fullmatch(value) else "'" + value
    return value


def write_csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """The project's one CSV writer: a header line, then the rows, every cell neutralised."""
    out = io.StringIO()
    # RFC 4180's CRLF: the csv module quotes a cell holding a line terminator's character,
    # so a CR inside a cell cannot end its row (with "\n" alone it is written bare).
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([spreadsheet_cell(value) for value in row] for row in rows)
    return out.getvalue()


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _report_columns(report: Report) -> list[object]:
    """The columns saying which report a row is of (the first of both headers)."""
    return [
        report["campaign"], report["window"]["start"], report["config_id"], report["level"],
        _flag("combined" in report), report["oracle"], report["epsilon"], report["n"],
        report["confidence"],
    ]  # fmt: skip


def csv_row(report: Report, item: Item) -> list[object]:
    """One item of one report; the proportions are the counts over the report's n."""
    n = report["n"]
    counts = (item["estimate"], item["stderr"], item["ci_low"], item["ci_high"])
    return [
        *_report_columns(report), item["item"], item["index"], *counts, item["consistent"],
        _flag(item["significant"]), *(count / n for count in counts),
    ]  # fmt: skip


def numeric_rows(report: Report) -> list[list[object]]:
    """A numeric report's mean row and bucket rows (none below min_reports)."""
    numeric = report.get("numeric")
    if numeric is None:
        return []
    head = [*_report_columns(report), numeric["low"], numeric["high"]]
    mean = numeric["mean"]
    mean_columns = (mean["estimate"], mean["stderr"], mean["ci_low"], mean["ci_high"])
    rows = [[*head, "mean", *mean_columns, mean["worst_case_stderr"], *[""] * 6]]
    distribution = numeric.get("distribution")
    for bucket in distribution["buckets"] if distribution else []:
        edges = (bucket["low"], bucket["high"], bucket["point"])
        values = (bucket["probability"], bucket["raw"], bucket["cdf"])
        rows.append([*head, "bucket", *[""] * 5, *edges, *values])
    return rows


#: A breakdown campaign's header: which report, which marginal and cell, its counts, the
#: consistent (post-processed, biased) count, and the proportions of n.
BREAKDOWN_CSV_COLUMNS = (
    *CSV_COLUMNS[:9], "attributes", "values", "estimate", "stderr", "ci_low", "ci_high",
    "consistent", "proportion", "proportion_ci_low", "proportion_ci_high",
)  # fmt: skip
#: How a marginal's attributes and a cell's labels are joined in a CSV and a table.
ATTRIBUTE_JOIN, VALUE_JOIN = " x ", " | "


def breakdown_rows(report: Report) -> list[list[object]]:
    """A breakdown report's cells, marginal by marginal (none below min_reports)."""
    section = report.get("breakdown")
    if section is None:
        return []
    head, n = _report_columns(report), report["n"]
    return [
        [
            *head,
            ATTRIBUTE_JOIN.join(marginal["attributes"]),
            VALUE_JOIN.join(cell["values"]),
            cell["estimate"],
            cell["stderr"],
            cell["ci_low"],
            cell["ci_high"],
            cell["consistent"],
            cell["estimate"] / n,
            cell["ci_low"] / n,
            cell["ci_high"] / n,
        ]
        for marginal in section["marginals"]
        for cell in marginal["cells"]
    ]


def table_rows(document: WindowDocument) -> tuple[tuple[str, ...], list[list[object]]]:
    """The header and rows of a window: every item of every report, largest estimate first
    within a report (a numeric campaign's window: every report's mean and buckets). The CSV
    and the Parquet file (parquet_export.py) are both written from these."""
    if any("numeric" in report for report in document["reports"]):
        return NUMERIC_CSV_COLUMNS, [row for r in document["reports"] for row in numeric_rows(r)]
    if any("breakdown" in report for report in document["reports"]):
        rows = [row for r in document["reports"] for row in breakdown_rows(r)]
        return BREAKDOWN_CSV_COLUMNS, rows
    rows = [
        csv_row(report, item)
        for report in document["reports"]
        for item in sorted(report["items"], key=lambda i: -i["estimate"])
    ]
    return CSV_COLUMNS, rows


def render_csv(document: WindowDocument) -> str:
    """The window's rows (table_rows) as CSV text."""
    return write_csv(*table_rows(document))
