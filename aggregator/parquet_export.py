"""A window document as a Parquet file, for pandas, polars and DuckDB: the same rows and
columns as the CSV (csv_export.table_rows), typed: numbers as numbers, the CSV's "true" and
"false" as booleans, its empty cells as nulls.

pyarrow is an optional dependency (`pip install ".[parquet]"`); without it the writer says so
in one line instead of failing at import."""

from __future__ import annotations

from pathlib import Path

from ldptel.aggregator.csv_export import table_rows
from ldptel.aggregator.model import WindowDocument

INSTALL_HINT = 'Parquet needs pyarrow: pip install "ldptel[parquet]" (or pyarrow)'


class ParquetUnavailableError(RuntimeError):
    """pyarrow is not installed."""


def _cell(value: object) -> object:
    # The CSV writes booleans as "true"/"false" and absent values as "": typed columns here.
    if value == "":
        return None
    if value in ("true", "false"):
        return value == "true"
    return value


def write_parquet(document: WindowDocument, path: Path) -> int:
    """Write the window's rows to `path`; returns how many rows were written."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnavailableError(INSTALL_HINT) from None
    header, rows = table_rows(document)
    columns = {name: [_cell(row[i]) for row in rows] for i, name in enumerate(header)}
    table = pa.table({name: pa.array(values) for name, values in columns.items()})
    pq.write_table(table, path)
    return len(rows)
