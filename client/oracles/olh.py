"""Optimized local hashing (Wang et al., USENIX Security 2017, Sec. 4.4): local hashing with
g = round(e^eps + 1) buckets by default, the g that minimizes the variance.
Wire form: {"seed": int in [0, 2^32), "y": int in [0, g)}."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import ReportBatch, ReportLog, check_epsilon
from ldptel.client.oracles.local_hashing import MAX_G, KeyLocalHashing, LocalHashing


def optimal_g(epsilon: float) -> int:
    """round(e^eps + 1), the variance-minimizing g (Wang et al. 2017, Sec. 4.4), capped at
    the largest g the wire allows. Python's round: a tie (e^eps + 1 exactly n + 1/2, as at
    e^eps = 1.5) goes to the even n. Configs carry the g they were created with, so only
    configs created before g was served derive it (docs/protocol.md, "Derived parameters")."""
    epsilon = check_epsilon(epsilon)
    if epsilon >= math.log(MAX_G):
        return MAX_G
    return min(MAX_G, round(math.exp(epsilon) + 1))


class OptimizedLocalHashing(LocalHashing):
    """OLH: p* = e^eps / (e^eps + g - 1), q* = 1/g; any g >= 2 may be chosen."""

    name = "olh"

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        g: int | None = None,
        labels: Sequence[str] | None = None,
        p: float | None = None,
    ) -> None:
        super().__init__(
            epsilon=epsilon,
            domain_size=domain_size,
            g=optimal_g(epsilon) if g is None else g,
            labels=labels,
            p=p,
        )

    def derived_params(self) -> dict[str, Any]:
        return {"g": self.g, **super().derived_params()}


class OpenDomainOLH(KeyLocalHashing, ReportLog):
    """OLH on an open domain (config `max_length`, no domain list): a report is OLH's report of
    the value's item key (a key mechanism: no domain), and the window state is the reports
    themselves (`ReportLog`), since
    each report's seed is its own hash function: the estimate of a candidate string v is
    Wang et al.'s (C_v - n/g) / (p - 1/g) with C_v = #{reports: H(item_key(v), seed) mod g
    == y}, counted over the log (`key_support`) when the report is built.

    Against a fixed public family (a sketch's k functions), per-report seeds leave no family
    term: for a candidate nobody holds, each report's bucket H(v, seed) mod g is uniform and
    independent of y under the ideal-hash model (the model of q* = 1/g), so C_v is exactly
    Binomial(n, 1/g) whatever the other strings' counts, and `variance` is the estimate's
    exact variance (Wang et al. 2017, eq. (2) with p* = p, q* = 1/g).

    Log record: seed as u32 and y as u16 (6 bytes) when g <= 2^16, else y as u32 (8 bytes).
    """

    name = "olh"

    def __init__(self, *, epsilon: float, g: int | None = None, p: float | None = None) -> None:
        super().__init__(epsilon=epsilon, g=optimal_g(epsilon) if g is None else g, p=p)

    def derived_params(self) -> dict[str, Any]:
        return {"g": self.g, **super().derived_params()}

    @property
    def log_record(self) -> np.dtype[Any]:
        y_type = "<u2" if self.g <= 2**16 else "<u4"
        return np.dtype([("seed", "<u4"), ("y", y_type)])

    def log_bytes(self, batch: ReportBatch) -> bytes:
        seeds, ys = np.asarray(batch["seed"]), np.asarray(batch["y"])
        if ys.size and int(ys.max()) >= self.g:
            raise ReportError("y", f"must be in [0, {self.g})")
        records = np.empty(seeds.size, dtype=self.log_record)
        records["seed"], records["y"] = seeds, ys
        return records.tobytes()
