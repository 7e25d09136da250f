"""A window document as a Parquet file, for pandas, polars and DuckDB: the same rows and
columns as the CSV (csv_export.table_rows), typed: numbers as numbers, the CSV's "true" and
"false" as booleans, its empty cells as nulls. Each column has one type whatever a window
holds (COLUMN_TYPES), so every window's file of a campaign has the same schema and a
reader can take them as one dataset (the aggregator's Parquet sink, aggregator/sinks/).

pyarrow is an optional dependency (`pip install ".[parquet]"`); without it the writer says so
in one line instead of failing at import."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ldptel.aggregator.csv_export import table_rows
from ldptel.aggregator.model import WindowDocument

INSTALL_HINT = 'Parquet needs pyarrow: pip install "ldptel[parquet]" (or pyarrow)'

_TEXT = (
    "campaign", "window_start", "config_id", "level", "oracle", "item", "row", "attributes",
    "values",
)  # fmt: skip
#: The Arrow type (a pyarrow factory's name) of every column of the CSV headers that is not a
#: double: text, flags and integer counts; the others are numbers that may be fractional (a
#: new header's text column must be listed here: pyarrow refuses text as a double).
COLUMN_TYPES = {
    **dict.fromkeys(_TEXT, "string"),
    **dict.fromkeys(("combined", "significant"), "bool_"),
    **dict.fromkeys(("n", "index"), "int64"),
}


class ParquetUnavailableError(RuntimeError):
    """pyarrow is not installed."""


def pyarrow() -> Any:
    """The pyarrow module, or ParquetUnavailableError saying how to install it."""
    try:
        import pyarrow as pa
        import pyarrow.parquet  # sets pa.parquet
    except ImportError:
        raise ParquetUnavailableError(INSTALL_HINT) from None
    return pa


def _cell(value: object) -> object:
    # The CSV writes booleans as "true"/"false" and absent values as "": typed columns here.
    if value == "":
        return None
    if value in ("true", "false"):
        return value == "true"
    return value


def window_table(document: WindowDocument) -> Any:
    """The window's rows as a pyarrow Table, each column of its COLUMN_TYPES type."""
    pa = pyarrow()
    header, rows = table_rows(document)
    return pa.table({
        name: pa.array(
            [_cell(row[i]) for row in rows], type=getattr(pa, COLUMN_TYPES.get(name, "float64"))()
        )
        for i, name in enumerate(header)
    })  # fmt: skip


def write_parquet(document: WindowDocument, path: Path) -> int:
    """Write the window's rows to `path`; returns how many rows were written."""
    table = window_table(document)
    pyarrow().parquet.write_table(table, path)
    return int(table.num_rows)
