"""The wire forms of the breakdowns whose reports all have the same fields (docs/breakdowns.md,
"Wire form"), and `breakdown_reports`, the ReportMechanism of any breakdown.

- `split`: every attribute's inner report under its name, `{"os.y": 2, "plan.y": 0,
  "country.bits": "..."}`; storage: each attribute's inner columns in attribute order;
  support: the kernel's state (`SplitBreakdown.state_of_batches`).
- `hadamard`: `{"coef": j, "bit": 0 or 1}`; storage: the coef column (u4) then the bit column
  (u1); support: per coefficient its reports, then its reports with bit 1.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.multi.hadamard import HadamardBreakdown
from ldptel.client.multi.mechanisms import Breakdown
from ldptel.client.multi.split import SplitBreakdown
from ldptel.client.multi.wire import BreakdownReports
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    ReportMechanism,
    WireReport,
    check_reports,
)
from ldptel.client.oracles.batch_decode import decode_int_field, decode_int_fields
from ldptel.client.oracles.unary import UnaryEncoding, decode_bit_vectors
from ldptel.client.randomness import Rng


def breakdown_reports(breakdown: Breakdown) -> BreakdownReports:
    """The reports of `breakdown` as every layer sees them."""
    if isinstance(breakdown, SplitBreakdown):
        return SplitReports(breakdown)
    if isinstance(breakdown, HadamardBreakdown):
        return HadamardReports(breakdown)
    return BreakdownReports(breakdown)


class _FlatReports(BreakdownReports):
    """Reports whose columns are `fields`, stored column-wise (ReportMechanism's storage)."""

    def pack(self, batch: ReportBatch) -> bytes:
        return ReportMechanism.pack(self, batch)

    def unpack(self, data: bytes, n: int) -> ReportBatch:
        return ReportMechanism.unpack(self, data, n)

    def _rows(self, values: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        sizes = self.breakdown.attributes.sizes
        indices = np.asarray(values, dtype=np.int64)
        return np.stack(np.unravel_index(indices, sizes), axis=1).astype(np.int64)


class SplitReports(_FlatReports):
    """`split`'s reports: each attribute's inner report, its keys prefixed "<attribute>."."""

    def __init__(self, breakdown: SplitBreakdown) -> None:
        super().__init__(breakdown)
        self.split = breakdown
        self.prefixes = tuple(f"{name}." for name in breakdown.attributes.names)
        self.fields = tuple(
            Field(prefix + f.name, f.dtype, f.width)
            for prefix, inner in zip(self.prefixes, self.inners, strict=True)
            for f in inner.fields
        )

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        rows = self._rows(values)
        batch: ReportBatch = {}
        for a, (prefix, inner) in enumerate(zip(self.prefixes, self.inners, strict=True)):
            own = inner.perturb_batch(rows[:, a], rng)
            batch.update({prefix + name: column for name, column in own.items()})
        return batch

    def widest_reports(self) -> list[WireReport]:
        report: WireReport = {}
        for prefix, inner in zip(self.prefixes, self.inners, strict=True):
            widest = max(inner.widest_reports(), key=lambda r: len(json.dumps(r)))
            report.update({prefix + k: v for k, v in widest.items()})
        return [report]

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        columns = [inner.encode(self._own(batch, a)) for a, inner in enumerate(self.inners)]
        reports: list[WireReport] = []
        for parts in zip(*columns, strict=True):
            report: WireReport = {}
            for prefix, part in zip(self.prefixes, parts, strict=True):
                report.update({prefix + k: v for k, v in part.items()})
            reports.append(report)
        return reports

    def decode(self, reports: object) -> ReportBatch:
        """Each attribute's column straight from its prefixed key, by its oracle's batch
        decoder (k-RR's integers, OUE's base64 bit vectors), errors naming the key."""
        items = check_reports(reports)
        batch: ReportBatch = {}
        for prefix, inner in zip(self.prefixes, self.inners, strict=True):
            name = prefix + inner.fields[0].name  # "bits" (OUE) or "y" (k-RR): INNER_ORACLES
            if isinstance(inner, UnaryEncoding):
                batch[name] = decode_bit_vectors(items, inner.domain_size, name)
            else:
                batch[name] = decode_int_field(items, name, inner.domain_size)
        return batch

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return self.split.state_of_batches([self._own(batch, a) for a in range(len(self.inners))])

    def _own(self, batch: ReportBatch, a: int) -> ReportBatch:
        prefix = self.prefixes[a]
        return {k.removeprefix(prefix): v for k, v in batch.items() if k.startswith(prefix)}


class HadamardReports(_FlatReports):
    """`hadamard`'s reports: the drawn coefficient and its randomized bit."""

    def __init__(self, breakdown: HadamardBreakdown) -> None:
        super().__init__(breakdown)
        self.hadamard = breakdown
        self.fields = (Field("coef", "<u4"), Field("bit", "u1"))

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        coef, bit = self.hadamard.report_batch(self._rows(values), rng)
        return {"coef": coef.astype(np.uint32), "bit": bit.astype(np.uint8)}

    def widest_reports(self) -> list[WireReport]:
        return [{"coef": self.hadamard.coefficients - 1, "bit": 1}]

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        pairs = zip(batch["coef"].tolist(), batch["bit"].tolist(), strict=True)
        return [{"coef": coef, "bit": bit} for coef, bit in pairs]

    def decode(self, reports: object) -> ReportBatch:
        limits: dict[str, tuple[int, type[np.unsignedinteger[Any]]]] = {
            "coef": (self.hadamard.coefficients, np.uint32),
            "bit": (2, np.uint8),
        }
        batch = decode_int_fields(reports, limits)
        return {"coef": batch["coef"].astype(np.uint32), "bit": batch["bit"].astype(np.uint8)}

    def unpack(self, data: bytes, n: int) -> ReportBatch:
        batch = super().unpack(data, n)
        if n and int(batch["coef"].max()) >= self.hadamard.coefficients:
            raise ReportError("payload", f"coef must be in [0, {self.hadamard.coefficients})")
        if n and int(batch["bit"].max()) > 1:
            raise ReportError("payload", "bit must be 0 or 1")
        return batch

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return self.hadamard.state_of_reports(batch["coef"], batch["bit"])
