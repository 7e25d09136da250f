"""The Hybrid Mechanism (Wang et al., ICDE 2019, Sec. III-C): with probability
alpha = 1 - e^(-eps/2) (for eps > 0.61, else 0) the Piecewise Mechanism, otherwise Duchi
et al.'s, each with the full epsilon, and each report's value is its own mechanism's
unbiased value. Codes: PM's [0, N), then Duchi's bit as N + bit.

The mixing weight is a / 2^32 (integer a), drawn exactly, independent of the input. Each
output belongs to one component, so its probability ratio between two inputs is that
component's: the loss is the larger of the two components' losses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.numeric.band import HEAVY, Piecewise
from ldptel.client.numeric.codes import CodeMechanism
from ldptel.client.numeric.duchi import Duchi
from ldptel.client.oracles.base import ReportBatch, check_int
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below, uniform_below_one

#: The mixing weight's denominator.
MIX_SCALE = 2**32
#: Below this epsilon HM is pure Duchi (Wang et al. 2019, eq. 9: eps* ~ 0.61).
PURE_DUCHI_BELOW = 0.61


def pm_weight(epsilon: float) -> int:
    """round(alpha 2^32), alpha = 1 - e^(-eps/2) above eps* (else 0)."""
    if epsilon <= PURE_DUCHI_BELOW:
        return 0
    return round(-math.expm1(-epsilon / 2) * MIX_SCALE)


class Hybrid(CodeMechanism):
    """HM on the grid: PM and Duchi share the levels (one rounding per report)."""

    name = "hm"
    guarantee_params = ("light", "heavy", "base", "step", "mix", "resolution")

    def __init__(
        self,
        *,
        epsilon: float,
        low: float,
        high: float,
        resolution: int | None = None,
        heavy: int = HEAVY,
        step: int | None = None,
        band: int | None = None,
        light: int | None = None,
        base: int | None = None,
        mix: int | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, low=low, high=high, resolution=resolution)
        common: dict[str, Any] = {
            "epsilon": self.requested_epsilon,
            "low": self.low,
            "high": self.high,
            "resolution": self.resolution,
        }
        self.pm = Piecewise(**common, heavy=heavy, band=band, light=light)
        self.duchi = Duchi(**common, step=step, base=base)
        self.mix = check_int(
            pm_weight(self.requested_epsilon) if mix is None else mix, "mix", 0, MIX_SCALE
        )
        self._set_codes(self.pm.code_count + 2)
        # Events: PM's band regions, then Duchi's two bits.
        self.audit_event_count = self.pm.audit_event_count + 2

    def fixed_params(self) -> dict[str, Any]:
        return {**self.pm.fixed_params(), **self.duchi.fixed_params()}

    def derived_params(self) -> dict[str, Any]:
        return {**self.pm.derived_params(), **self.duchi.derived_params(), "mix": self.mix}

    @property
    def epsilon(self) -> float:
        used = [self.pm.epsilon] if self.mix else []
        return max(used + ([self.duchi.epsilon] if self.mix < MIX_SCALE else []))

    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        use_pm = sample_uniform_below(rng, MIX_SCALE, levels.size) < self.mix
        codes = self.duchi.perturb_levels(levels, rng)["y"].astype(np.int64) + self.pm.code_count
        if use_pm.any():
            codes[use_pm] = self.pm.perturb_levels(levels[use_pm], rng)["y"]
        return {"y": codes.astype(self.fields[0].dtype)}

    def code_one(self, level: int) -> int:
        if uniform_below_one(MIX_SCALE) < self.mix:
            return self.pm.code_one(level)
        return self.pm.code_count + self.duchi.code_one(level)

    @property
    def code_values(self) -> NDArray[np.float64]:
        return np.concatenate((self.pm.code_values, self.duchi.code_values))

    def second_moments(self) -> NDArray[np.float64]:
        share = self.mix / MIX_SCALE
        moments: NDArray[np.float64] = (
            share * self.pm.second_moments() + (1 - share) * self.duchi.second_moments()
        )
        return moments

    def code_probabilities(self, level: int) -> NDArray[np.float64]:
        share = self.mix / MIX_SCALE
        return np.concatenate(
            (
                share * self.pm.code_probabilities(level),
                (1 - share) * self.duchi.code_probabilities(level),
            )
        )

    def audit_events(self, batch: ReportBatch, level: int, other: int) -> NDArray[np.int64]:
        codes = batch["y"].astype(np.int64)
        duchi = codes >= self.pm.code_count
        regions = self.pm.regions(np.where(duchi, 0, codes), level, other)
        events: NDArray[np.int64] = np.where(
            duchi, codes - self.pm.code_count + self.pm.audit_event_count, regions
        )
        return events

    def audit_probabilities(self, level: int, other: int) -> NDArray[np.float64]:
        share = self.mix / MIX_SCALE
        return np.concatenate(
            (
                share * self.pm.audit_probabilities(level, other),
                (1 - share) * self.duchi.code_probabilities(level),
            )
        )
