"""What the dashboard reads of a breakdown campaign: a pair of attributes picked by the analyst
(`Pick`), that pair's cross-tab in one window's report (`cross_tab`, rows the first
attribute's labels, whatever order the report stores the pair in), and one cell's numbers
across the campaign's windows (`CellSeries.trend`).

A trend needs a cell of every window, so each window's marginals are kept as columns (five
floats a cell, no labels), cached per process by the version the store's index gives each
document, as dashboard/series.py keeps the items of other campaigns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import (
    BreakdownCell,
    BreakdownMarginal,
    BreakdownSection,
    Report,
    from_json,
)
from ldptel.aggregator.reports import OK
from ldptel.client.errors import ParameterError
from ldptel.dashboard.charts import TrendPoint
from ldptel.dashboard.series import WindowCache, views, window_label
from ldptel.store.connection import RedisClient

#: How a cell's labels are joined in the `cell` parameter and the page's data attributes.
CELL_JOIN = "|"
#: The columns kept per cell, in this order.
FIELDS = ("estimate", "stderr", "ci_low", "ci_high", "consistent")
ABSENT = "cell not in this window's attributes"


@dataclass(frozen=True)
class Pick:
    """The analyst's choice: the attribute down the rows, the one across the columns, and
    the cell (a label of each, in that order) whose trend is drawn."""

    rows: str
    columns: str
    cell: tuple[str, str]

    @property
    def pair(self) -> tuple[str, str]:
        return self.rows, self.columns


def cell_key(values: Sequence[str]) -> str:
    return CELL_JOIN.join(values)


def pick_pair(names: Sequence[str], rows: str | None, columns: str | None) -> tuple[str, str]:
    """Two different attributes of `names`; a missing one is the first name not taken."""
    for field, name in (("rows", rows), ("columns", columns)):
        if name is not None and name not in names:
            raise ParameterError(field, f"not an attribute of this campaign: {name!r}")
    if rows is not None and rows == columns:
        raise ParameterError("columns", "must be another attribute than rows")
    rows = rows or next(n for n in names if n != columns)
    columns = columns or next(n for n in names if n != rows)
    return rows, columns


def parse_cell(text: str, labels: tuple[Sequence[str], Sequence[str]]) -> tuple[str, str]:
    """`cell=ios|pro`: a label of the rows' attribute and one of the columns', joined by |
    (labels may hold a |: the text is matched against every cell, and must name one)."""
    found = [(a, b) for a in labels[0] for b in labels[1] if cell_key((a, b)) == text]
    if len(found) != 1:
        reason = "names two cells" if found else "not a cell of the picked attributes"
        raise ParameterError("cell", f"{reason}: {text!r} (a label of each, joined by |)")
    return found[0]


@dataclass(frozen=True)
class CrossTab:
    """A two-way marginal with rows `pair[0]`'s labels and columns `pair[1]`'s: `cells[r][c]`
    is the stored report's cell, unchanged."""

    pair: tuple[str, str]
    labels: tuple[tuple[str, ...], tuple[str, ...]]
    cells: list[list[BreakdownCell]]

    def largest(self) -> tuple[str, str]:
        """The cell with the largest unbiased estimate (the default cell to follow)."""
        r, c = max(
            ((r, c) for r in range(len(self.labels[0])) for c in range(len(self.labels[1]))),
            key=lambda rc: self.cells[rc[0]][rc[1]]["estimate"],
        )
        return self.labels[0][r], self.labels[1][c]


def marginal_of(section: BreakdownSection, names: Sequence[str]) -> BreakdownMarginal | None:
    """The marginal over exactly `names` (in any order), None if the report has none."""
    wanted = sorted(names)
    return next((m for m in section["marginals"] if sorted(m["attributes"]) == wanted), None)


def cross_tab(section: BreakdownSection, pair: tuple[str, str]) -> CrossTab | None:
    """The pair's marginal oriented as picked (None: the report lacks the pair)."""
    marginal = marginal_of(section, pair)
    if marginal is None:
        return None
    rows, columns = (tuple(section["attributes"][name]) for name in pair)
    stored = marginal["attributes"]
    width = len(section["attributes"][stored[1]])

    def cell(r: int, c: int) -> BreakdownCell:
        i, j = (r, c) if list(pair) == stored else (c, r)
        return marginal["cells"][i * width + j]

    cells = [[cell(r, c) for c in range(len(columns))] for r in range(len(rows))]
    return CrossTab(pair, (rows, columns), cells)


@dataclass(frozen=True)
class CellWindow:
    """One stored window of a breakdown campaign, its cells as columns: for each marginal
    (attributes in stored order), an array of cells x FIELDS, row-major over the labels."""

    window: int
    version: int
    config_id: str
    n: int
    status: str
    attributes: dict[str, tuple[str, ...]]
    marginals: dict[tuple[str, ...], NDArray[np.float64]]

    def numbers(self, pair: tuple[str, str], cell: tuple[str, str]) -> NDArray[np.float64] | None:
        """The FIELDS of one cell (None: this window's report has no such cell)."""
        if self.status != OK:
            return None
        key = pair if pair in self.marginals else (pair[1], pair[0])
        columns = self.marginals.get(key)
        if columns is None:
            return None
        by_name = dict(zip(pair, cell, strict=True))
        index = 0
        for name in key:
            labels = self.attributes[name]
            if by_name[name] not in labels:
                return None
            index = index * len(labels) + labels.index(by_name[name])
        found: NDArray[np.float64] = columns[index]
        return found


def cell_window(report: Report, version: int) -> CellWindow:
    section = report.get("breakdown")
    marginals = {}
    for marginal in section["marginals"] if section else []:
        marginals[tuple(marginal["attributes"])] = np.array(
            [[cell[field] for field in FIELDS] for cell in marginal["cells"]],  # type: ignore[literal-required]
            dtype=np.float64,
        )
    attributes = {k: tuple(v) for k, v in section["attributes"].items()} if section else {}
    return CellWindow(
        window=report["window"]["start_unix"], version=version, config_id=report["config_id"],
        n=report["n"], status=report["status"], attributes=attributes, marginals=marginals,
    )  # fmt: skip


def _cell_window(window: int, raw: bytes, version: int) -> CellWindow | None:
    report = views(from_json(raw)).get("")
    return None if report is None else cell_window(report, version)


class CellSeries:
    """Every stored window of breakdown campaigns as cells (thread-safe)."""

    def __init__(self, client: RedisClient) -> None:
        self._windows = WindowCache(client, _cell_window)

    def windows(self, name: str) -> list[CellWindow]:
        """Oldest first; only new or rebuilt documents are read from Redis (WindowCache)."""
        return self._windows.windows(name)

    def trend(self, name: str, pair: tuple[str, str], cell: tuple[str, str]) -> list[TrendPoint]:
        """One cell across the campaign's windows: its numbers where the window's report has
        enough reports and holds the cell, else the status (not plotted)."""
        points = []
        for held in self.windows(name):
            label = window_label(held.window)
            found = held.numbers(pair, cell)
            if found is None:
                status = held.status if held.status != OK else ABSENT
                points.append(TrendPoint(held.window, label, held.config_id, held.n, status))
                continue
            estimate, stderr, low, high, consistent = (float(v) for v in found)
            point = TrendPoint(
                held.window, label, held.config_id, held.n, held.status, estimate=estimate,
                stderr=stderr, ci_low=low, ci_high=high, consistent=consistent,
            )  # fmt: skip
            points.append(point)
        return points
