"""Mechanisms whose report is one integer code y in [0, m) (duchi, 1bitmean, pm, hm, sw).

Each code has an unbiased value (`code_values`, the range's units): for every level s,
sum_y P(y | s) value(y) = level s. The support is the histogram of codes, the mean the
codes' values averaged, the variance exact from the law `code_probabilities`.
Wire form: {"y": int in [0, m)}.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
from numpy.typing import NDArray

from ldptel.client.numeric.base import NumericMechanism
from ldptel.client.oracles.base import Field, ReportBatch, WireReport
from ldptel.client.oracles.batch_decode import decode_int_field


class CodeMechanism(NumericMechanism):
    """A numeric mechanism reporting one code; subclasses give its law and values."""

    audit_event_count: int

    def _set_codes(self, count: int) -> None:
        """Declare the m = count codes (call at the end of the subclass's __init__)."""
        self.code_count = count
        self.audit_event_count = count
        self.fields = (Field("y", "<u2" if count <= 2**16 else "<u4"),)

    @property
    @abstractmethod
    def code_values(self) -> NDArray[np.float64]:
        """Each code's unbiased value of the level, in the range's units."""

    @abstractmethod
    def code_probabilities(self, level: int) -> NDArray[np.float64]:
        """P(y | level) for every code y, from the law's exact integer weights."""

    @abstractmethod
    def code_one(self, level: int) -> int:
        """One code of `level` from the OS CSPRNG: perturb_levels' law in Python integers."""

    def perturb_level_one(self, level: int) -> WireReport:
        return {"y": self.code_one(level)}

    def law(self) -> NDArray[np.float64]:
        """P(y | s) as a (K + 1) x m matrix."""
        return np.array([self.code_probabilities(s) for s in range(self.resolution + 1)])

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"y": y} for y in batch["y"].tolist()]

    def decode(self, reports: object) -> ReportBatch:
        codes = decode_int_field(reports, "y", self.code_count)
        return {"y": codes.astype(self.fields[0].dtype)}

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return self.code_count

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return np.bincount(batch["y"], minlength=self.code_count).astype(np.int64)

    def mean(self, support: NDArray[np.int64], n: int) -> float:
        return float(np.dot(np.asarray(support, dtype=np.float64), self.code_values)) / n

    def second_moments(self) -> NDArray[np.float64]:
        """E[value(y)^2 | level s] for s = 0..K."""
        values = self.code_values
        moments: NDArray[np.float64] = self.law() @ (values * values)
        return moments

    def level_variance(self) -> NDArray[np.float64]:
        return np.maximum(self.second_moments() - self.levels**2, 0.0)

    def mean_variance_estimate(self, support: NDArray[np.int64], n: int) -> float:
        # The reports' sample variance / n: unbiased for the mean report variance plus the
        # true values' own spread / n (so conservative); n = 1 gives no spread: worst case.
        if n < 2:
            return self.worst_report_variance() / max(n, 1)
        counts = np.asarray(support, dtype=np.float64)
        values = self.code_values
        mean = float(np.dot(counts, values)) / n
        spread = float(np.dot(counts, (values - mean) ** 2)) / (n - 1)
        return spread / n

    # -- audit -----------------------------------------------------------------------------
    def audit_events(self, batch: ReportBatch, level: int, other: int) -> NDArray[np.int64]:
        return batch["y"].astype(np.int64)

    def audit_probabilities(self, level: int, other: int) -> NDArray[np.float64]:
        return self.code_probabilities(level)
