"""The wire, storage and support form of memoization "tree" reports (ldptel.client.tree).

A report is {"item": i, "level": h} and, in the windows where a node of level h is read,
"bit": 0 or 1 (docs/protocol.md, "Tree reports"). Item and level are public by design (the
guarantee holds given them). Storage: three columns (item <u2, level u1, bit u1 with 2 for
"no bit"); support: per (item, level), the counts of bit 1, bit 0 and no bit, so that support
vectors of batches add like every mechanism's, and a window's report reads the counts of its
read level (`node_sum`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    ReportMechanism,
    WireReport,
    check_reports,
    report_int,
)
from ldptel.client.randomness import Rng, SecureRandom
from ldptel.client.tree import TreeShape

NO_BIT = 2


class TreeReports(ReportMechanism):
    """A tree config's reports, for the collector (validate, pack) and the aggregator
    (support); the client's per-install law is `TreeShape.report`."""

    name = "tree"

    def __init__(self, shape: TreeShape) -> None:
        self.shape = shape
        self.requested_epsilon = shape.epsilon
        self.fields = (Field("item", "<u2"), Field("level", "u1"), Field("bit", "u1"))

    def perturb(self, value: Any, rng: Rng | None = None) -> WireReport:
        """The first window's report of a new install holding label index `value` (the
        per-window reports of an install come from `TreeShape.report` on its state)."""
        rng = rng or SecureRandom()
        state = self.shape.new_state(rng)
        state = self.shape.observe(state, 0, self.shape.indicator(state, int(value)))
        return wire(self.shape.report(state, 0, rng))

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        columns = (batch[f.name].tolist() for f in self.fields)
        rows = zip(*columns, strict=True)
        return [_wire(item, level, bit) for item, level, bit in rows]

    def decode(self, reports: object) -> ReportBatch:
        items = check_reports(reports)
        n = len(items)
        batch = {f.name: np.empty(n, dtype=f.dtype) for f in self.fields}
        for i, report in enumerate(items):
            if not isinstance(report, dict):
                raise ReportError("report", "must be an object", i)
            unknown = sorted(set(report) - {"item", "level", "bit"})
            if unknown:
                raise ReportError(unknown[0], "unknown field", i)
            batch["item"][i] = report_int(report, "item", self.shape.items, i)
            batch["level"][i] = report_int(report, "level", self.shape.levels, i)
            batch["bit"][i] = report_int(report, "bit", 2, i) if "bit" in report else NO_BIT
        return batch

    @property
    def support_size(self) -> int:
        return self.shape.items * self.shape.levels * 3

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        cell = (batch["item"].astype(np.int64) * self.shape.levels + batch["level"]) * 3
        # Column 0: bit 1, column 1: bit 0, column 2: no bit.
        column = np.where(batch["bit"] == 1, 0, np.where(batch["bit"] == 0, 1, 2))
        return np.bincount(cell + column, minlength=self.support_size).astype(np.int64)

    def node_sum(self, support: NDArray[np.int64], item: int, level: int) -> int:
        """The sum of the +-1 bits at (item, level) in a window's support."""
        cell = (item * self.shape.levels + level) * 3
        return int(support[cell] - support[cell + 1])


def _wire(item: int, level: int, bit: int | None) -> WireReport:
    report: WireReport = {"item": item, "level": level}
    if bit is not None and bit != NO_BIT:
        report["bit"] = bit
    return report


def wire(report: Any) -> WireReport:
    """A TreeReport in its wire form."""
    return _wire(report.item, report.level, report.bit)
