"""Breakdowns simulated and audited: n users' rows through a breakdown mechanism's real code,
every one-way and two-way marginal beside the truth; the exact privacy loss of one report."""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.audit import audit_pairs, exact_audit
from ldptel.analysis.simulation import true_counts
from ldptel.client.errors import ParameterError
from ldptel.client.multi import Attributes, Breakdown, HadamardBreakdown, Marginal, SplitBreakdown
from ldptel.client.multi.hadamard import parity

#: Input pairs of an inner oracle audited exactly: all of them up to 64 cells.
AUDIT_PAIRS = 64 * 63 // 2
#: Rows perturbed at a time (bounds the OUE bit matrices' memory).
CHUNK_ROWS = 50_000


@dataclass(frozen=True)
class MarginalResult:
    """A marginal's estimate beside the true counts of its cells."""

    marginal: Marginal
    true: NDArray[np.int64]


def simulated_rows(
    attributes: Attributes, n: int, rng: np.random.Generator, zipf_exponent: float = 1.1
) -> NDArray[np.int64]:
    """n rows whose joint cells follow a Zipf law over a random order of the joint domain
    (so the attributes are dependent, as real breakdowns are)."""
    counts = true_counts(n, attributes.joint_size, rng, "zipf", zipf_exponent)
    cells = rng.permutation(attributes.joint_size)[np.repeat(np.arange(counts.size), counts)]
    return np.stack(np.unravel_index(cells, attributes.sizes), axis=1).astype(np.int64)


def rows_from_csv(path: str, names: list[str]) -> tuple[Attributes, NDArray[np.int64]]:
    """A CSV with a header, one user a row, its columns `names` the attributes; each
    attribute's labels are its distinct values, most frequent first."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            table = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as error:
        raise ParameterError("values_file", f"cannot read {path}: {error}") from None
    if len(table) < 2:
        raise ParameterError("values_file", "needs a header and at least one row")
    header, body = table[0], table[1:]
    for i, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ParameterError(
                "values_file", f"line {i} has {len(row)} fields, not {len(header)}"
            )
    columns = list(zip(*body, strict=True))
    labels = {}
    for name, column in zip(header, columns, strict=True):
        counted: dict[str, int] = {}
        for value in column:
            counted[value] = counted.get(value, 0) + 1
        labels[name] = sorted(counted, key=lambda v: -counted[v])
        if len(labels[name]) < 2:
            labels[name].append(f"(other {name})")  # an attribute needs two labels
    attributes = Attributes.from_config(labels)
    rows = np.array(
        [[attributes.labels[a].index(v) for a, v in enumerate(row)] for row in body],
        dtype=np.int64,
    )
    return attributes, rows


def simulate_breakdown(
    mechanism: Breakdown, rows: NDArray[np.int64], rng: np.random.Generator
) -> list[MarginalResult]:
    """Every one-way and two-way marginal (and, for `joint`, no more) of the rows' reports."""
    state = np.zeros(mechanism.state_size, dtype=np.int64)
    for start in range(0, rows.shape[0], CHUNK_ROWS):
        state += mechanism.state_of_rows(rows[start : start + CHUNK_ROWS], rng)
    attributes = mechanism.attributes
    joint = np.bincount(attributes.joint_index(rows), minlength=attributes.joint_size)
    k = len(attributes.names)
    results = []
    for which in [*itertools.combinations(range(k), 1), *itertools.combinations(range(k), 2)]:
        axes = tuple(a for a in range(k) if a not in which)
        true = joint.reshape(attributes.sizes).sum(axis=axes).reshape(-1)
        results.append(MarginalResult(mechanism.marginal(state, which), true.astype(np.int64)))
    return results


def audit_breakdown(mechanism: Breakdown) -> float:
    """Exact privacy loss of one report between any two rows (every attribute may differ).

    `joint`: the inner oracle's loss over its domain. `pairs`: a report is (j, inner_j's
    report of the row's pair-j cell) with j uniform and independent of the row, so
    P[(j, e) | row] = P_j[e | cell_j(row)] / C(k, 2) and the loss is the largest inner loss
    over cells (every two cells of a pair come from some two rows). `split`: a report is the
    attributes' independent inner reports, so P[report | row] is their product and, as two
    rows may differ in every attribute, the loss is the sum of the inner losses. Every pair
    of inputs is audited for inner domains up to 64 cells, a fixed sample of AUDIT_PAIRS
    beyond. `hadamard`: `audit_hadamard`."""
    if isinstance(mechanism, HadamardBreakdown):
        return audit_hadamard(mechanism)
    losses = [
        exact_audit(
            oracle, audit_pairs(oracle.domain_size, AUDIT_PAIRS, np.random.default_rng(0))
        ).epsilon
        for oracle in mechanism.inners
    ]
    return sum(losses) if isinstance(mechanism, SplitBreakdown) else max(losses)


def audit_hadamard(mechanism: HadamardBreakdown) -> float:
    """A report is (j, bit) with P[(j, b) | row] = (p if b = parity_j(row) else 1 - p) / |T|,
    j drawn independently of the row. The loss over every pair of rows is, per event, the log
    of its largest over its smallest probability across rows; coefficient j's parity depends
    on the row only through its one or two attributes, every combination of whose values
    some row holds, so its rows are those attributes' cells (computed from the mechanism's
    own masks, codes and p)."""
    sizes, bits, offsets = mechanism.attributes.sizes, mechanism.bits, mechanism.offsets
    worst = 0.0
    for mask in mechanism.masks.tolist():
        own = [a for a in range(len(sizes)) if (mask >> offsets[a]) & ((1 << bits[a]) - 1)]
        values = np.array(list(itertools.product(*(range(sizes[a]) for a in own))))
        codes = np.zeros(values.shape[0], dtype=np.int64)
        for column, a in zip(values.T, own, strict=True):
            codes |= column.astype(np.int64) << offsets[a]
        odd = parity(np.int64(mask) & codes)
        for bit in (0, 1):
            law = np.where(odd == bit, mechanism.p, 1 - mechanism.p) / mechanism.coefficients
            worst = max(worst, float(np.log(law.max() / law.min())))
    return worst
