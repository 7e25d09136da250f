"""The sliding-band law on the grid, shared by the Piecewise Mechanism (pm) and Square Wave
(sw), whose continuous laws have the same shape: density p on a band of fixed width that
slides with the input, q < p elsewhere, p / q = e^eps (Wang et al., ICDE 2019, Sec. III-B;
Li et al., SIGMOD 2020, Sec. 4).

Level s in 0..K is reported as a code j in [0, N), N = K + w: j lies in the band [s, s + w)
with weight P each, elsewhere with weight Q each (integers, P / Q <= e^eps). With
T = N Q + w (P - Q), the draw is one uniform u in [0, T): u < w (P - Q) gives the band cell
s + u // (P - Q), else the cell (u - w (P - Q)) // Q of the whole output (so the band gets
Q + (P - Q) = P). P(j | s) / P(j | s') is P/Q, 1 or Q/P, so the loss is ln(P / Q).

E[j | s] = (Q N (N - 1) / 2 + (P - Q) (w s + w (w - 1) / 2)) / T = a + b s is affine in s,
so (j - a) / b is an unbiased value of the level (in grid units) for every code.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.numeric.codes import CodeMechanism
from ldptel.client.oracles.base import ReportBatch, check_int
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_uniform_below, uniform_below_one

#: P, the band's weight: Q = ceil(P e^-eps) >= 3 even at eps = 20, and T <= N P < 2^52.
HEAVY = 2**30


def light_weight(heavy: int, epsilon: float) -> int:
    """The least Q with ln(P / Q) <= epsilon."""
    light = max(1, math.ceil(heavy * math.exp(-epsilon)))
    while math.log(heavy / light) > epsilon:
        light += 1
    if light >= heavy:
        raise ParameterError("epsilon", f"must be >= {1 / heavy:.3g} (P / Q > 1 in integers)")
    return light


#: The audit's events for a pair of levels low < high: the code in low's band only, in
#: high's only, in both, in neither. Every code of one event has the same probability ratio
#: between the two levels (P/Q, Q/P, 1, 1), so the events lose nothing of the privacy loss.
REGIONS = ("low band", "high band", "both bands", "neither band")
#: Largest band: codes are stored as uint32.
MAX_BAND = 2**24


class SlidingBand(CodeMechanism):
    """A sliding-band law with band width w (subclasses choose w from epsilon)."""

    guarantee_params = ("light", "heavy")

    def __init__(
        self,
        *,
        epsilon: float,
        low: float,
        high: float,
        resolution: int | None = None,
        band: int | None = None,
        heavy: int = HEAVY,
        light: int | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, low=low, high=high, resolution=resolution)
        self.heavy = check_int(heavy, "heavy", 2, 2**40)
        self.light = check_int(
            light_weight(self.heavy, self.requested_epsilon) if light is None else light,
            "light",
            1,
            self.heavy - 1,
        )
        default_band = self.optimal_band_fraction(self.requested_epsilon) * self.resolution
        self.band = check_int(
            max(1, round(default_band)) if band is None else band, "band", 1, MAX_BAND
        )
        self.outputs = self.resolution + self.band
        self.extra = self.heavy - self.light
        self.total = self.outputs * self.light + self.band * self.extra
        n, w = self.outputs, self.band
        self.intercept = (self.light * n * (n - 1) / 2 + self.extra * w * (w - 1) / 2) / self.total
        self.slope = w * self.extra / self.total
        self._set_codes(self.outputs)
        self.audit_event_count = len(REGIONS)

    @staticmethod
    @abstractmethod
    def optimal_band_fraction(epsilon: float) -> float:
        """The paper's band width over the input range's width, for epsilon."""

    def fixed_params(self) -> dict[str, Any]:
        return {**super().fixed_params(), "heavy": self.heavy}

    def derived_params(self) -> dict[str, Any]:
        return {"band": self.band, "light": self.light}

    @property
    def epsilon(self) -> float:
        return math.log(self.heavy / self.light)

    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        u = sample_uniform_below(rng, self.total, levels.size)
        banded = self.band * self.extra
        codes = np.where(u < banded, levels + u // self.extra, (u - banded) // self.light)
        return {"y": codes.astype(self.fields[0].dtype)}

    def code_one(self, level: int) -> int:
        u = uniform_below_one(self.total)
        banded = self.band * self.extra
        return level + u // self.extra if u < banded else (u - banded) // self.light

    @property
    def code_values(self) -> NDArray[np.float64]:
        codes = np.arange(self.outputs, dtype=np.float64)
        return self.level_value((codes - self.intercept) / self.slope)

    def law(self) -> NDArray[np.float64]:
        codes = np.arange(self.outputs)
        levels = np.arange(self.resolution + 1)[:, None]
        banded = (codes >= levels) & (codes < levels + self.band)
        law: NDArray[np.float64] = np.where(banded, self.heavy, self.light) / self.total
        return law

    def second_moments(self) -> NDArray[np.float64]:
        # In closed form (a (K + 1) x N law is large on fine grids): the value is
        # c0 + c1 j, and E[j^m | s] sums Q j^m over all codes plus (P - Q) j^m over the band.
        def power_sums(m: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
            """(sum of j, sum of j^2) for j < m."""
            m = m.astype(np.float64)
            return m * (m - 1) / 2, (m - 1) * m * (2 * m - 1) / 6

        s = np.arange(self.resolution + 1)
        all_one, all_two = power_sums(np.array(self.outputs))
        low_one, low_two = power_sums(s)
        high_one, high_two = power_sums(s + self.band)
        first = (self.light * all_one + self.extra * (high_one - low_one)) / self.total
        second = (self.light * all_two + self.extra * (high_two - low_two)) / self.total
        c0, c1 = self.code_values[0], self.code_values[1] - self.code_values[0]
        moments: NDArray[np.float64] = c0 * c0 + 2 * c0 * c1 * first + c1 * c1 * second
        return moments

    def code_probabilities(self, level: int) -> NDArray[np.float64]:
        weights = np.full(self.outputs, self.light, dtype=np.float64)
        weights[level : level + self.band] = self.heavy
        probabilities: NDArray[np.float64] = weights / self.total
        return probabilities

    # -- audit -----------------------------------------------------------------------------
    def regions(self, codes: NDArray[np.int64], level: int, other: int) -> NDArray[np.int64]:
        """Each code's event of REGIONS for the pair {level, other}."""
        low, high = min(level, other), max(level, other)
        in_low = (codes >= low) & (codes < low + self.band)
        in_high = (codes >= high) & (codes < high + self.band)
        events: NDArray[np.int64] = np.where(
            in_low & in_high, 2, np.where(in_low, 0, np.where(in_high, 1, 3))
        )
        return events

    def audit_events(self, batch: ReportBatch, level: int, other: int) -> NDArray[np.int64]:
        return self.regions(batch["y"].astype(np.int64), level, other)

    def audit_probabilities(self, level: int, other: int) -> NDArray[np.float64]:
        events = self.regions(np.arange(self.outputs), level, other)
        weights = self.code_probabilities(level)
        return np.bincount(events, weights=weights, minlength=len(REGIONS)).astype(np.float64)


class Piecewise(SlidingBand):
    """The Piecewise Mechanism (Wang et al., ICDE 2019, Alg. 2): for t in [-1, 1] the output
    lies in [-C, C], C = (e^(eps/2) + 1) / (e^(eps/2) - 1), with density p on
    [l(t), l(t) + C - 1], l(t) = (C + 1) t / 2 - (C - 1) / 2, p / q = e^eps. The band's left
    end slides over C + 1 while the band is C - 1 wide: w / K = e^(-eps/2). Worst-case
    variance (their eq. 5, t = 1): (range/2)^2 ((e^(eps/2) + 3) / (3 (e^(eps/2) - 1)^2) +
    1 / (e^(eps/2) - 1)), reached on the fine grid (the test checks it)."""

    name = "pm"

    @staticmethod
    def optimal_band_fraction(epsilon: float) -> float:
        return math.exp(-epsilon / 2)
