"""dBitFlip (Ding, Kulkarni, Yekhanin, NeurIPS 2017, Sec. 2.2), Microsoft's histogram
mechanism: the value's bucket is one of d (here the d = K + 1 levels, after the unbiased
rounding of base.py); the client samples d' of the d buckets uniformly without replacement
and reports, for each sampled bucket t, a bit that is 1 with probability e^(eps/2) /
(e^(eps/2) + 1) if t is its bucket and 1 / (e^(eps/2) + 1) otherwise.

On the grid the bit is 1 with probability P / (P + Q) or Q / (P + Q), integers with
P / Q <= e^(eps/2), drawn from one uniform integer below P + Q. Changing the bucket from s to
s' changes the law of at most the two bits of s and s' (the sampled set does not depend on
the value), so the loss is 2 ln(P / Q) <= eps.

Estimate (their Sec. 2.2): f_t = (d / (n d')) sum over reports sampling t of
((P + Q) b - Q) / (P - Q), unbiased for the fraction of values at level t; the mean
sum_t f_t level_t is unbiased for the mean. With z the per-bit term, E[z | t = s] = 1,
E[z | t != s] = 0, E[z^2] = m0 + [t = s], m0 = P Q / (P - Q)^2, so one report's value
y = (d / d') sum_{t sampled} z_t level_t has E[y^2 | s] = (d / d') (m0 sum_t level_t^2 +
level_s^2).

Wire form: {"j": [d' distinct sampled buckets, ascending], "b": [their d' bits]}.
Support: [n_t for t < d] + [ones_t for t < d], integers that add across batches.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.numeric.band import HEAVY, light_weight
from ldptel.client.numeric.base import Distribution, NumericMechanism
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    WireReport,
    check_int,
    check_reports,
)
from ldptel.client.randomness import Rng
from ldptel.client.samplers import sample_subsets, sample_uniform_below

#: Largest d: bucket indices are stored as uint16.
MAX_BUCKETS = 2**16


class DBitFlip(NumericMechanism):
    """dBitFlip over the d = K + 1 levels, d' = `sampled` bits per report."""

    name = "dbitflip"
    guarantee_params = ("light", "heavy")
    estimates_distribution = True
    default_resolution = 31
    #: The pair's two buckets, each unsampled, bit 0 or bit 1: 3 x 3 events.
    audit_event_count = 9

    def __init__(
        self,
        *,
        epsilon: float,
        low: float,
        high: float,
        resolution: int | None = None,
        sampled: int | None = None,
        heavy: int = HEAVY,
        light: int | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, low=low, high=high, resolution=resolution)
        self.buckets = check_int(self.resolution + 1, "resolution", 2, MAX_BUCKETS)
        self.sampled = check_int(
            self.buckets if sampled is None else sampled, "sampled", 1, self.buckets
        )
        self.heavy = check_int(heavy, "heavy", 2, 2**40)
        self.light = check_int(
            light_weight(self.heavy, self.requested_epsilon / 2) if light is None else light,
            "light",
            1,
            self.heavy - 1,
        )
        self.fields = (Field("j", "<u2", self.sampled), Field("b", "u1", self.sampled))

    def fixed_params(self) -> dict[str, Any]:
        return {**super().fixed_params(), "sampled": self.sampled, "heavy": self.heavy}

    def derived_params(self) -> dict[str, Any]:
        return {"light": self.light}

    @property
    def epsilon(self) -> float:
        return 2 * math.log(self.heavy / self.light)

    # -- client ----------------------------------------------------------------------------
    def perturb_levels(self, levels: NDArray[np.int64], rng: Rng) -> ReportBatch:
        n, d, k = levels.size, self.buckets, self.sampled
        if k == d:
            chosen = np.broadcast_to(np.arange(d, dtype=np.int64), (n, d))
        else:
            packed = sample_subsets(rng, d, np.full(n, k, dtype=np.int64))
            bits = np.unpackbits(packed, axis=1)[:, :d].astype(bool)
            chosen = np.nonzero(bits)[1].reshape(n, k)
        own = chosen == levels[:, None]
        u = sample_uniform_below(rng, self.heavy + self.light, n * k).reshape(n, k)
        ones = u < np.where(own, self.heavy, self.light)
        return {"j": chosen.astype(np.uint16), "b": ones.astype(np.uint8)}

    # -- wire ------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [
            {"j": j, "b": b} for j, b in zip(batch["j"].tolist(), batch["b"].tolist(), strict=True)
        ]

    def decode(self, reports: object) -> ReportBatch:
        items = check_reports(reports)
        k = self.sampled
        chosen = np.empty((len(items), k), dtype=np.uint16)
        ones = np.empty((len(items), k), dtype=np.uint8)
        for i, report in enumerate(items):
            if not isinstance(report, dict):
                raise ReportError("report", "must be an object", i)
            chosen[i] = self._int_list(report, "j", k, self.buckets, i)
            ones[i] = self._int_list(report, "b", k, 2, i)
            if np.any(np.diff(chosen[i].astype(np.int64)) <= 0):
                raise ReportError("j", "must be distinct buckets in ascending order", i)
        return {"j": chosen, "b": ones}

    @staticmethod
    def _int_list(
        report: dict[str, Any], name: str, size: int, limit: int, index: int
    ) -> list[int]:
        value = report.get(name)
        if not isinstance(value, list) or len(value) != size:
            raise ReportError(name, f"must be a list of {size} integers", index)
        if not all(type(v) is int and 0 <= v < limit for v in value):
            raise ReportError(name, f"must hold integers in [0, {limit})", index)
        return value

    # -- aggregator ------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        return 2 * self.buckets

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        chosen = batch["j"].reshape(-1)
        sampled = np.bincount(chosen, minlength=self.buckets)
        ones = np.bincount(chosen[batch["b"].reshape(-1) == 1], minlength=self.buckets)
        return np.concatenate((sampled, ones)).astype(np.int64)

    def fractions(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        """The unbiased estimate f_t of the fraction of values at each level."""
        counts = np.asarray(support, dtype=np.float64)
        sampled, ones = counts[: self.buckets], counts[self.buckets :]
        p, q = self.heavy, self.light
        scale = self.buckets / (n * self.sampled)
        result: NDArray[np.float64] = scale * ((p + q) * ones - q * sampled) / (p - q)
        return result

    def mean(self, support: NDArray[np.int64], n: int) -> float:
        return float(np.dot(self.fractions(support, n), self.levels))

    def distribution(self, support: NDArray[np.int64], n: int) -> Distribution:
        return Distribution.on_levels(self.levels, self.fractions(support, n))

    @property
    def _noise(self) -> float:
        """m0 = P Q / (P - Q)^2, the per-bit term's second moment off its bucket."""
        return self.heavy * self.light / (self.heavy - self.light) ** 2

    def level_variance(self) -> NDArray[np.float64]:
        x = self.levels
        ratio = self.buckets / self.sampled
        second = ratio * (self._noise * float(np.dot(x, x)) + x * x)
        variance: NDArray[np.float64] = second - x * x
        return variance

    def mean_variance_estimate(self, support: NDArray[np.int64], n: int) -> float:
        # Var(y - v) for a value v rounded to level s: (d/d') m0 sum x^2 + (d/d') E[x_s^2]
        # - v^2 = (d/d') m0 sum x^2 + (d/d' - 1) E[x_s^2] + (E[x_s^2] - v^2). E[x_s^2] is
        # estimated without bias by sum_t f_t x_t^2; the last term, the rounding's variance
        # (v - x_lo)(x_hi - v), is bounded by step^2 / 4 (its maximum, mid-cell). Without it
        # the stated stderr was too small on coarse grids: K = 3, eps = 8, uniform values:
        # true variance 1.63x the stated one, 95% intervals covering 86.9%.
        x = self.levels
        ratio = self.buckets / self.sampled
        square = float(np.dot(self.fractions(support, n), x * x))
        rounding = ((self.high - self.low) / self.resolution) ** 2 / 4
        return (ratio * self._noise * float(np.dot(x, x)) + (ratio - 1) * square + rounding) / n

    # -- audit -----------------------------------------------------------------------------
    def audit_events(self, batch: ReportBatch, level: int, other: int) -> NDArray[np.int64]:
        # Only the bits of the pair's buckets depend on the level: the sampled set does not,
        # the other bits have the same law under both. State: 0 unsampled, 1 + bit.
        low, high = min(level, other), max(level, other)
        chosen = batch["j"].astype(np.int64)
        bits = batch["b"].astype(np.int64)
        states = [np.where(chosen == t, 1 + bits, 0).sum(axis=1) for t in (low, high)]
        events: NDArray[np.int64] = 3 * states[0] + states[1]
        return events

    def audit_probabilities(self, level: int, other: int) -> NDArray[np.float64]:
        d, k = self.buckets, self.sampled
        both = k * (k - 1) / (d * (d - 1))
        one = k / d - both
        sampled_joint = {(1, 1): both, (1, 0): one, (0, 1): one, (0, 0): 1 - 2 * k / d + both}
        p_own = self.heavy / (self.heavy + self.light)
        p_other = self.light / (self.heavy + self.light)
        low, high = min(level, other), max(level, other)
        result = np.zeros(9)
        for low_state in range(3):
            for high_state in range(3):
                joint = sampled_joint[(int(low_state > 0), int(high_state > 0))]
                for bucket, state in ((low, low_state), (high, high_state)):
                    if state:
                        one_prob = p_own if bucket == level else p_other
                        joint *= one_prob if state == 2 else 1 - one_prob
                result[3 * low_state + high_state] = joint
        return result
