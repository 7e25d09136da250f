"""Duchi et al.'s mechanism (Duchi, Jordan, Wainwright, JASA 2018, Sec. 4.2.3, 1-D) and
Microsoft's 1BitMean (Ding, Kulkarni, Yekhanin, NeurIPS 2017, Sec. 2.1), which is the same
law: one bit, 1 with probability 1/(e^eps + 1) + (x/m) (e^eps - 1)/(e^eps + 1) for x in
[0, m] (Duchi's 1/2 + t (e^eps - 1) / (2 (e^eps + 1)) for t = 2x/m - 1 in [-1, 1]), and the
same unbiased estimate (m/n) sum (b (e^eps + 1) - 1) / (e^eps - 1).

On the grid: P(1 | level s) = (A + B s) / T, T = 2A + B K, integers (B = `step`), so the
probability is exactly affine in s and the bit's unbiased values are s = -A/B (bit 0) and
K + A/B (bit 1). The loss is ln((A + B K) / A): A = ceil(B K / (e^eps - 1)) is the least A
within the requested epsilon. Its worst-case variance is the paper's ((e^eps + 1)/(e^eps - 1))^2
(range/2)^2 as B K grows (the test checks it); the rounding adds at most (range/K)^2 / 4.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.numeric.codes import CodeMechanism
from ldptel.client.oracles.base import ReportBatch, check_int
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below, uniform_below_one

#: B K, the probability's span over the range, by default (B = SPAN // K): T = 2A + B K stays
#: below 2^40 down to epsilon = 0.001, and A's rounding moves the loss by < 2^-28 relative.
SPAN = 2**28
#: The largest A: T = 2A + B K stays below 2^41 (exact uniform integers, few rejections).
MAX_BASE = 2**40
#: The smallest epsilon whose A fits: B K / A ~ eps.
MIN_EPSILON = SPAN / MAX_BASE


def bit_base(epsilon: float, span: int) -> int:
    """The least A with ln((A + span) / A) <= epsilon (span = B K)."""
    base = max(1, math.ceil(span / math.expm1(epsilon)))
    while math.log1p(span / base) > epsilon:
        base += 1
    return base


class Duchi(CodeMechanism):
    """Duchi et al.'s one-bit mechanism on the grid (codes 0 and 1)."""

    name = "duchi"
    guarantee_params = ("base", "step", "resolution")
    default_resolution = 2**16

    def __init__(
        self,
        *,
        epsilon: float,
        low: float,
        high: float,
        resolution: int | None = None,
        step: int | None = None,
        base: int | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, low=low, high=high, resolution=resolution)
        self.step = check_int(
            max(1, SPAN // self.resolution) if step is None else step, "step", 1, SPAN
        )
        span = self.step * self.resolution
        if base is None:
            base = bit_base(self.requested_epsilon, span)
            if base > MAX_BASE:
                raise ParameterError("epsilon", f"must be >= {MIN_EPSILON:g} for {self.name}")
        self.base = check_int(base, "base", 1, MAX_BASE)
        self.total = 2 * self.base + span
        self._set_codes(2)

    def fixed_params(self) -> dict[str, Any]:
        return {**super().fixed_params(), "step": self.step}

    def derived_params(self) -> dict[str, Any]:
        return {"base": self.base}

    @property
    def epsilon(self) -> float:
        return math.log1p(self.step * self.resolution / self.base)

    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        u = sample_uniform_below(rng, self.total, levels.size)
        return {"y": (u < self.base + self.step * levels).astype(np.uint16)}

    def code_one(self, level: int) -> int:
        return int(uniform_below_one(self.total) < self.base + self.step * level)

    @property
    def code_values(self) -> NDArray[np.float64]:
        shift = self.base / self.step
        return self.level_value(np.array([-shift, self.resolution + shift]))

    def code_probabilities(self, level: int) -> NDArray[np.float64]:
        one = (self.base + self.step * level) / self.total
        return np.array([(self.total - self.base - self.step * level) / self.total, one])

    def law(self) -> NDArray[np.float64]:
        one = (self.base + self.step * np.arange(self.resolution + 1)) / self.total
        return np.stack((1 - one, one), axis=1)


class OneBitMean(Duchi):
    """Microsoft's 1BitMean (Ding et al. 2017): Duchi et al.'s law under its deployed name."""

    name = "1bitmean"
