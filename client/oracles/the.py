"""Thresholding with histogram encoding (THE; Wang et al., USENIX Security 2017, Sec. 4.3).

Same report as SHE (`histogram.py`: {"z": base64 of d little-endian int32}); the aggregator
counts, per item, the reports with z > theta R. That makes THE a pure protocol with
p* = P(z > t | true item) and q* = P(z > t | other item), computed exactly from the grid law.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.oracles.base import PureOracle, ReportBatch
from ldptel.client.oracles.histogram import HistogramEncoding


class ThresholdHistogramEncoding(HistogramEncoding, PureOracle):
    """THE: a report supports item i if z_i > theta R. `theta` in (1/2, 1); by default the
    threshold that minimizes the exact variance q*(1-q*)/(p*-q*)^2."""

    name = "the"
    #: At R = 1 thresholding is exactly SUE (z > 0 has p* = 1 - q*); R = 2 is the grid on
    #: which it is not with the lowest variance, below the paper's continuous THE at every
    #: eps (4.59 vs 4.81 at eps = 1, 0.223 vs 0.285 at eps = 4; it grows towards it with R).
    default_resolution = 2

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        resolution: int | None = None,
        noise: Mapping[str, Any] | None = None,
        theta: float | None = None,
    ) -> None:
        super().__init__(
            epsilon=epsilon, domain_size=domain_size, resolution=resolution, noise=noise
        )
        # z is an integer, so z > theta R  <=>  z > floor(theta R): theta in (1/2, 1) gives the
        # integer thresholds t in [floor(R/2), R-1].
        self.thresholds = np.arange(self.resolution // 2, self.resolution, dtype=np.int64)
        self.theta = None if theta is None else _check_theta(theta)
        if self.theta is None:
            self.threshold = int(self.thresholds[np.argmin(self.threshold_variances())])
        else:
            self.threshold = math.floor(self.theta * self.resolution)
        p, q = self._exceed(np.array([self.threshold]))
        self._p_star, self._q_star = float(p[0]), float(q[0])

    def derived_params(self) -> dict[str, Any]:
        # The chosen integer threshold t as a theta with floor(theta R) = t: (t + 3/4) / R
        # lies in (1/2, 1) for every t in [floor(R/2), R-1] and is exact in binary for R = 2^j.
        theta = (self.threshold + 0.75) / self.resolution
        return {**super().derived_params(), "theta": theta}

    def _exceed(self, t: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self.noise.exceed(self.resolution, t), self.noise.exceed(0, t)

    def threshold_variances(self) -> NDArray[np.float64]:
        """Per-report variance q*(1-q*)/(p*-q*)^2 at each allowed threshold (`thresholds`)."""
        p, q = self._exceed(self.thresholds)
        result: NDArray[np.float64] = q * (1 - q) / (p - q) ** 2
        return result

    @property
    def p_star(self) -> float:
        return self._p_star

    @property
    def q_star(self) -> float:
        return self._q_star

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        above = np.asarray(batch["z"]) > self.threshold
        support: NDArray[np.int64] = above.sum(axis=0, dtype=np.int64)
        return support


def _check_theta(theta: object) -> float:
    if isinstance(theta, bool) or not isinstance(theta, (int, float, np.floating)):
        raise ParameterError("theta", f"must be a number, got {type(theta).__name__}")
    value = float(theta)
    if not 0.5 < value < 1.0:
        raise ParameterError("theta", f"must be in (1/2, 1), got {value!r}")
    return value
