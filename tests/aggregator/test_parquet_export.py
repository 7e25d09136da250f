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
