"""A breakdown campaign's reports as every layer sees them (docs/breakdowns.md, "Wire").

A user's value is their row's index in the joint domain (row-major, `Attributes.joint_index`).
A `joint` report is its inner oracle's report over the joint domain; a `pairs` report is
`{"pair": j, ...}` with pair j's inner oracle's fields. Storage: for `pairs`, the pair column
(one byte a report) and then each pair's reports packed by its own oracle, in pair order; for
`joint`, the inner oracle's storage. Support: per inner oracle, its number of reports and its
support vector, concatenated in inner order (the kernel's window state, `Breakdown.marginal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.multi.mechanisms import Breakdown
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    ReportMechanism,
    WireReport,
    check_reports,
)
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below

PAIR = "pair"


class BreakdownReports(ReportMechanism):
    """The reports of a breakdown mechanism, for the SDK (`perturb` of a joint index), the
    collector (decode, pack) and the aggregator (unpack, support)."""

    name = "breakdown"

    def __init__(self, breakdown: Breakdown) -> None:
        self.breakdown = breakdown
        self.requested_epsilon = breakdown.requested_epsilon
        self.inners: tuple[PureOracle, ...] = breakdown.inners
        self.paired = len(self.inners) > 1
        fields = {f.name: f for inner in self.inners for f in inner.fields}
        pair = (Field(PAIR, "u1"),) if self.paired else ()
        self.fields = (*pair, *fields.values())

    @property
    def epsilon(self) -> float:
        return self.breakdown.epsilon

    def derived_params(self) -> dict[str, Any]:
        return {"inner": self.breakdown.inner_params()}

    def perturb(self, value: Any, rng: Rng | None = None) -> WireReport:
        """A report of joint index `value` from the OS CSPRNG (the kernel's `perturb_row`)."""
        row = np.unravel_index(int(value), self.breakdown.attributes.sizes)
        return self.breakdown.perturb_row(tuple(int(i) for i in row))

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        """Reports of many joint indices from `rng` (simulations and tests; the same law as
        the kernel's `state_of_rows`), as a batch in the form `decode` returns."""
        indices = np.asarray(values, dtype=np.int64)
        rows = np.stack(np.unravel_index(indices, self.breakdown.attributes.sizes), axis=1)
        if not self.paired:
            return self.inners[0].perturb_batch(indices, rng)
        pair = sample_uniform_below(rng, len(self.inners), indices.size).astype(np.uint8)
        batch: ReportBatch = {PAIR: pair}
        sizes = self.breakdown.attributes.sizes
        for j, ((a, b), inner) in enumerate(
            zip(self.breakdown.attributes.pairs, self.inners, strict=True)
        ):
            mine = rows[pair == j]
            own = inner.perturb_batch(mine[:, a] * sizes[b] + mine[:, b], rng)
            batch.update({f"{j}.{name}": column for name, column in own.items()})
        return batch

    def widest_reports(self) -> list[WireReport]:
        return [
            {PAIR: j, **report} if self.paired else report
            for j, inner in enumerate(self.inners)
            for report in inner.widest_reports()
        ]

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        if not self.paired:
            return self.inners[0].encode(batch)
        pair = batch[PAIR]
        reports: list[WireReport] = [{} for _ in range(pair.size)]
        for j, inner in enumerate(self.inners):
            positions = np.flatnonzero(pair == j).tolist()
            own = inner.encode(_group(batch, j))
            for position, report in zip(positions, own, strict=True):
                reports[position] = {PAIR: j, **report}
        return reports

    def decode(self, reports: object) -> ReportBatch:
        if not self.paired:
            return self.inners[0].decode(reports)
        items = check_reports(reports)
        # The pair column in one pass; each group's reports go to its oracle's batch decoder
        # (which ignores the "pair" key), and a group's error names the report's own index.
        pair = decode_int_field(items, PAIR, len(self.inners), np.uint8).astype(np.uint8)
        batch: ReportBatch = {PAIR: pair}
        for j, inner in enumerate(self.inners):
            positions = np.flatnonzero(pair == j)
            try:
                own = inner.decode([items[i] for i in positions.tolist()])
            except ReportError as error:
                if error.index is None:
                    raise
                field = error.field.split(".", 1)[-1]
                raise ReportError(field, error.reason, int(positions[error.index])) from None
            batch.update({f"{j}.{name}": column for name, column in own.items()})
        return batch

    # -- storage ---------------------------------------------------------------------------
    def pack(self, batch: ReportBatch) -> bytes:
        if not self.paired:
            return self.inners[0].pack(batch)
        parts = [np.ascontiguousarray(batch[PAIR], dtype=np.uint8).tobytes()]
        parts += [inner.pack(_group(batch, j)) for j, inner in enumerate(self.inners)]
        return b"".join(parts)

    def unpack(self, data: bytes, n: int) -> ReportBatch:
        if not self.paired:
            return self.inners[0].unpack(data, n)
        if len(data) < n:
            raise ReportError("payload", f"expected at least {n} bytes for {n} reports")
        pair = np.frombuffer(data, dtype=np.uint8, count=n)
        if n and int(pair.max()) >= len(self.inners):
            raise ReportError("payload", f"pair must be in [0, {len(self.inners)})")
        counts = np.bincount(pair, minlength=len(self.inners)).tolist()
        batch: ReportBatch = {PAIR: pair}
        offset = n
        for j, (inner, count) in enumerate(zip(self.inners, counts, strict=True)):
            size = sum(f.nbytes(count) for f in inner.fields)
            own = inner.unpack(data[offset : offset + size], count)
            batch.update({f"{j}.{name}": column for name, column in own.items()})
            offset += size
        if offset != len(data):
            raise ReportError("payload", f"expected {offset} bytes for {n} reports")
        return batch

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.breakdown.state_size

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        if not self.paired:
            inner = self.inners[0]
            n = len(next(iter(batch.values())))
            return np.concatenate(([n], inner.support(batch))).astype(np.int64)
        parts = []
        for j, inner in enumerate(self.inners):
            own = _group(batch, j)
            parts.append(np.concatenate(([int(np.sum(batch[PAIR] == j))], inner.support(own))))
        return np.concatenate(parts).astype(np.int64)

    def state(self, reports: Sequence[Any]) -> NDArray[np.int64]:
        """The additive window state of wire reports (ReportError naming reports[i])."""
        return self.support(self.decode(list(reports)))


def _group(batch: ReportBatch, j: int) -> ReportBatch:
    """Pair j's own columns of a `pairs` batch, under its oracle's field names."""
    prefix = f"{j}."
    return {k.removeprefix(prefix): v for k, v in batch.items() if k.startswith(prefix)}
