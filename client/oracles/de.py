"""Direct encoding (k-ary randomized response; Wang et al., USENIX Security 2017, Sec. 4.1).

Wire form: {"y": int}, the reported item in [0, d).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    WireReport,
    check_probabilities,
)
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.randomness import Rng
from ldptel.client.samplers import (
    bernoulli_one,
    sample_bernoulli,
    sample_uniform_below,
    uniform_below_one,
)


class DirectEncoding(PureOracle):
    """k-RR: keep the true value with probability p = e^eps / (e^eps + d - 1), else report one
    of the other d - 1 values uniformly (each with q = 1 / (e^eps + d - 1)). A config serves
    p and q (`derived_params`); given, they are used as they are."""

    name = "de"
    audit_event_count = 3

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        p: float | None = None,
        q: float | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.fields = (Field("y", "<u4"),)
        d = self.domain_size
        if p is None and q is None:
            e = math.exp(self.requested_epsilon)
            self.p, self.q = e / (e + d - 1), 1.0 / (e + d - 1)
            return
        self.p, self.q = check_probabilities(p, q)
        # q is the estimator's; the law gives each other value (1 - p)/(d - 1).
        if abs(self.p + (d - 1) * self.q - 1) > 1e-9:
            raise ParameterError("q", "must be (1 - p) / (d - 1)")
        self.check_served("p")

    def derived_params(self) -> dict[str, Any]:
        return {"p": self.p, "q": self.q}

    @property
    def epsilon(self) -> float:
        # p / q = e^eps exactly; recomputed from the parameters as the guarantee.
        return math.log(self.p / self.q)

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return self.q

    def perturb_one(self, value: int) -> WireReport:
        # perturb_batch's law in Python integers (the SDK's per-report path).
        if bernoulli_one(self.p):
            return {"y": value}
        other = uniform_below_one(self.domain_size - 1)
        return {"y": other + (other >= value)}

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        values = np.asarray(values, dtype=np.int64)
        keep = sample_bernoulli(rng, self.p, values.size)
        # A uniform draw from the d - 1 other values: draw in [0, d-1) and skip the true one.
        other = sample_uniform_below(rng, self.domain_size - 1, values.size)
        other += other >= values
        return {"y": np.where(keep, values, other).astype(np.uint32)}

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"y": y} for y in batch["y"].tolist()]

    def decode(self, reports: object) -> ReportBatch:
        return {"y": decode_int_field(reports, "y", self.domain_size)}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return np.bincount(batch["y"], minlength=self.domain_size).astype(np.int64)

    @property
    def output_count(self) -> int:
        return self.domain_size

    def output_index(self, batch: ReportBatch) -> NDArray[np.int64]:
        return batch["y"].astype(np.int64)

    def output_law(self, value: int) -> NDArray[np.float64]:
        # What perturb draws: v with p, each other value with (1 - p)/(d - 1).
        law = np.full(self.domain_size, (1 - self.p) / (self.domain_size - 1))
        law[value] = self.p
        return law

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: y is the smaller of the pair, y is the larger, y is neither.
        y = batch["y"].astype(np.int64)
        low, high = min(value, other), max(value, other)
        return np.where(y == low, 0, np.where(y == high, 1, 2))

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        at_low, at_high = (self.p, self.q) if value < other else (self.q, self.p)
        return np.array([at_low, at_high, max(0.0, 1.0 - self.p - self.q)])
