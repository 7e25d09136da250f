"""The Parquet file of a window holds the CSV's rows, typed, for every report kind."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from ldptel.aggregator.csv_export import render_csv
from ldptel.aggregator.model import from_json
from ldptel.aggregator.parquet_export import write_parquet

pq = pytest.importorskip("pyarrow.parquet")  # the test extra installs it
GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.json"))


def as_csv(value: object) -> str:
    """A Parquet cell as the CSV writes it: nulls empty, booleans lower case."""
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("golden", GOLDEN, ids=[path.stem for path in GOLDEN])
def test_every_report_kinds_parquet_rows_equal_its_csv_rows(golden: Path, tmp_path: Path) -> None:
    document = from_json(golden.read_text())
    expected = list(csv.DictReader(io.StringIO(render_csv(document))))
    path = tmp_path / "w.parquet"
    assert write_parquet(document, path) == len(expected) > 0
    table = pq.read_table(path)
    assert table.column_names == next(csv.reader(io.StringIO(render_csv(document))))
    assert [{k: as_csv(v) for k, v in row.items()} for row in table.to_pylist()] == expected
    assert str(table.schema.field("n").type) == "int64"
    assert str(table.schema.field("estimate").type) == "double"


def test_every_column_has_one_type_whatever_the_window_holds(tmp_path: Path) -> None:
    """A campaign's windows are one dataset only if their files agree on every column's type:
    a level that is null in one window and text in another, an epsilon that is 1 in one and
    0.5 in another, are typed alike (pyarrow would otherwise infer null, int64, double)."""
    from ldptel.aggregator.csv_export import (
        BREAKDOWN_CSV_COLUMNS,
        CSV_COLUMNS,
        NUMERIC_CSV_COLUMNS,
    )
    from ldptel.aggregator.parquet_export import COLUMN_TYPES

    names = {"string": "string", "bool_": "bool", "int64": "int64"}
    for golden in GOLDEN:
        path = tmp_path / f"{golden.stem}.parquet"
        write_parquet(from_json(golden.read_text()), path)
        schema = pq.read_schema(path)
        headers = (CSV_COLUMNS, NUMERIC_CSV_COLUMNS, BREAKDOWN_CSV_COLUMNS)
        assert schema.names in [list(header) for header in headers]
        for field in schema:
            assert str(field.type) == names.get(COLUMN_TYPES.get(field.name, ""), "double")
