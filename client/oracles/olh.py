"""Optimized local hashing (Wang et al., USENIX Security 2017, Sec. 4.4): local hashing with
g = round(e^eps + 1) buckets by default, the g that minimizes the variance.
Wire form: {"seed": int in [0, 2^32), "y": int in [0, g)}."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ldptel.client.oracles.base import check_epsilon
from ldptel.client.oracles.local_hashing import MAX_G, LocalHashing


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
