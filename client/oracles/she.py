"""Summation with histogram encoding (SHE; Wang et al., USENIX Security 2017, Sec. 4.3).

The aggregator sums the reported integers per item (offset by the clamp M, see below); the
report, its noise and its wire form are those of `histogram.py`: {"z": base64 of d
little-endian int32}.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.histogram import HistogramEncoding


class SummationHistogramEncoding(HistogramEncoding):
    """SHE: support = per-item sum of (z + M), estimate = (support - n (M + mu_0)) /
    (mu_R - mu_0). The offset M keeps support a non-negative integer like every oracle's
    count (the aggregator treats a negative one as corrupt); sums of batches still add."""

    name = "she"

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        z = np.asarray(batch["z"])
        support: NDArray[np.int64] = z.sum(axis=0, dtype=np.int64) + z.shape[0] * self.clamp
        return support

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        # E[support_v] = n M + n_v mu_R + (n - n_v) mu_0, with mu_x the exact mean of a
        # reported coordinate of input x (mu_0 = 0; mu_R = R up to the clamped tail's mass).
        mu0, muR = self.noise.mean(0), self.noise.mean(self.resolution)
        return (np.asarray(support, dtype=np.float64) - n * (self.clamp + mu0)) / (muR - mu0)

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        # Paper: n 8/eps^2 (Laplace). Exactly, for the grid law: n ((1-f_v) s_0^2 + f_v s_R^2)
        # / (mu_R - mu_0)^2, s_x^2 the variance of a coordinate of input x (s_R ~= s_0).
        R = self.resolution
        f = np.zeros(self.domain_size) if frequencies is None else np.asarray(frequencies)
        scale = (self.noise.mean(R) - self.noise.mean(0)) ** 2
        return n * ((1 - f) * self.noise.variance(0) + f * self.noise.variance(R)) / scale
