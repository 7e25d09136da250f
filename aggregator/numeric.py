"""The estimates of a numeric campaign's window (ldptel.client.numeric): the mean of the
clipped values with its standard error and confidence interval, and, for the distribution
mechanisms (sw, dbitflip), the histogram over the grid's buckets, its CDF and quantiles."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from ldptel.aggregator.model import Bucket, DistributionEstimate, MeanEstimate, Numeric
from ldptel.client.numeric import NumericMechanism

#: The quantiles every distribution estimate lists.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
MEAN_METHOD = (
    "unbiased estimate of the mean of the clipped values; variance = the reports' sample "
    "variance / n (unbiased for the reports' mean variance plus the values' own spread / n, "
    "so conservative); CI = estimate +/- z stderr (normal approximation)"
)
CLIPPING = "values below the range count as its low end, values above it as its high end"


def mean_estimate(
    mechanism: NumericMechanism, support: NDArray[np.int64], n: int, confidence: float
) -> MeanEstimate:
    """The mean with its estimated variance, stderr and confidence interval."""
    estimate = mechanism.mean(support, n)
    variance = mechanism.mean_variance_estimate(support, n)
    stderr = math.sqrt(variance)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return {
        "estimate": estimate,
        "variance": variance,
        "stderr": stderr,
        "ci_low": estimate - z * stderr,
        "ci_high": estimate + z * stderr,
        "worst_case_stderr": math.sqrt(mechanism.mean_variance(n)),
        "method": MEAN_METHOD,
    }


def distribution_estimate(
    mechanism: NumericMechanism, support: NDArray[np.int64], n: int
) -> DistributionEstimate:
    """The estimated distribution as buckets with probabilities and CDF, and quantiles."""
    found = mechanism.distribution(support, n)
    buckets: list[Bucket] = [
        {"low": low, "high": high, "point": point, "probability": p, "raw": raw, "cdf": cdf}
        for low, high, point, p, raw, cdf in zip(
            found.edges[:-1].tolist(),
            found.edges[1:].tolist(),
            found.points.tolist(),
            found.probabilities.tolist(),
            found.raw.tolist(),
            found.cdf.tolist(),
            strict=True,
        )
    ]
    return {
        "method": f"{mechanism.name}: probabilities of the grid's levels, made consistent "
        "(>= 0, summing to 1); quantiles interpolated linearly within a bucket",
        "buckets": buckets,
        "quantiles": [{"q": q, "value": found.quantile(q)} for q in QUANTILES],
    }


def numeric_estimates(
    mechanism: NumericMechanism, support: NDArray[np.int64], n: int, confidence: float
) -> Numeric:
    """A numeric report's `numeric` section."""
    section: Numeric = {
        "low": mechanism.low,
        "high": mechanism.high,
        "resolution": mechanism.resolution,
        "clipping": CLIPPING,
        "mean": mean_estimate(mechanism, support, n, confidence),
    }
    if mechanism.estimates_distribution:
        section["distribution"] = distribution_estimate(mechanism, support, n)
    return section
