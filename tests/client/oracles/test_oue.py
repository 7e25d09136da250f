"""OUE (Wang et al., USENIX Security 2017, Sec. 4.3): its parameters, the exact law of its
sampler, and unbiased estimates at a small q (the contract tests run larger ones)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from contract_checks import check_unbiased, check_variance, known_counts, repeat_estimates
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

from ldptel.client.errors import ParameterError
from ldptel.client.oracles import make_oracle, unary
from ldptel.client.oracles.base import MAX_EPSILON
from ldptel.client.oracles.oue import OptimizedUnaryEncoding
from ldptel.client.oracles.unary import unpack_bits
from ldptel.client.randomness import Rng

ALPHA = 1e-3


def test_parameters_and_variance_follow_the_paper() -> None:
    oracle = make_oracle("oue", epsilon=1.5, domain_size=40)
    e = math.exp(1.5)
    assert (oracle.p, oracle.q) == (0.5, pytest.approx(1 / (e + 1), rel=1e-15))
    # Var / n with f_v = 0: 4 e^eps / (e^eps - 1)^2 (Wang et al. 2017, eq. (12)).
    assert oracle.variance(1000) == pytest.approx(np.full(40, 1000 * 4 * e / (e - 1) ** 2))


@given(st.floats(min_value=1e-3, max_value=MAX_EPSILON))
def test_the_guaranteed_epsilon_is_the_requested_one(epsilon: float) -> None:
    oracle = make_oracle("oue", epsilon=epsilon, domain_size=3)
    assert oracle.epsilon == pytest.approx(epsilon, rel=1e-9)


def test_a_huge_epsilon_is_rejected_and_the_largest_accepted_is_exact() -> None:
    # Past MAX_EPSILON q would round to 0 (an infinite epsilon, or an overflow).
    with pytest.raises(ParameterError, match=r"^epsilon: must be <= 20"):
        make_oracle("oue", epsilon=800.0, domain_size=3)
    oracle = make_oracle("oue", epsilon=MAX_EPSILON, domain_size=3)
    assert oracle.q > 0 and oracle.epsilon == pytest.approx(MAX_EPSILON, rel=1e-9)


# -- the sampler's law -----------------------------------------------------------------------


def binomial_p_values(ones: Any, trials: Any, prob: float) -> NDArray[np.float64]:
    """Exact two-sided binomial p-values (the normal approximation is poor in the upper tail
    when trials * prob is ~20, as for eps = 7)."""
    low, high = stats.binom.cdf(ones, trials, prob), stats.binom.sf(ones - 1, trials, prob)
    return np.asarray(np.minimum(2 * np.minimum(low, high), 1.0), dtype=np.float64)


def normal_p_value(z: float) -> float:
    return float(2 * stats.norm.sf(abs(z)))


def law_p_values(
    bits: NDArray[np.uint8], values: NDArray[np.int64], p: float, q: float
) -> Iterator[tuple[str, float]]:
    """(check, two-sided p-value) for each law check of unary reports (rows of bits, true
    values): the rate of ones at each position when it is the true one (vs p) and when not
    (vs q), pooled over all other positions, and the mean and variance of each report's count
    of ones among its d - 1 other bits, Binomial(d - 1, q)."""
    n, d = bits.shape
    true = np.zeros((n, d), dtype=bool)
    true[np.arange(n), values] = True
    for mask, prob, label in ((true, p, "true"), (~true, q, "other")):
        trials, ones = mask.sum(axis=0), (bits.astype(bool) & mask).sum(axis=0)
        p_values = binomial_p_values(ones, trials, prob)
        worst = int(np.argmin(p_values))
        yield f"rate of {label} bit at position {worst}", float(p_values[worst])
    trials, ones = int((~true).sum()), int(bits[~true].sum())
    yield "pooled rate of other bits", float(binomial_p_values(ones, trials, q))
    counts = bits.sum(axis=1) - bits[np.arange(n), values]
    mean, var = (d - 1) * q, (d - 1) * q * (1 - q)
    yield "mean count of other ones", normal_p_value((counts.mean() - mean) / math.sqrt(var / n))
    # The sample variance's standard error from the binomial's 4th central moment
    # mu4 = 3 var^2 + var (1 - 6 q (1 - q)).
    mu4 = 3 * var**2 + var * (1 - 6 * q * (1 - q))
    z = (counts.var(ddof=1) - var) / math.sqrt((mu4 - var**2) / n)
    yield "variance of the count of other ones", normal_p_value(z)


def law_failures(
    oracle: OptimizedUnaryEncoding, n: int = 20_000, seed: int = 21, p: float | None = None
) -> list[str]:
    """The failed law checks of n reports (each item the true one n / d times), against the
    oracle's own p and q (or another p); Bonferroni over all 2 d + 3 checks."""
    rng = np.random.default_rng(seed)
    d = oracle.domain_size
    values = np.arange(n, dtype=np.int64) % d
    bits = unpack_bits(oracle.perturb_batch(values, rng)["bits"], d)
    level = ALPHA / (2 * d + 3)
    return [
        f"{check}: p-value {p_value:.2g} < {level:.2g}"
        for check, p_value in law_p_values(bits, values, oracle.p if p is None else p, oracle.q)
        if p_value < level
    ]


# q = 0.27, 0.018, 9.1e-4: a first digit of q (base 256) of 68, 4 and 0.
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 64), (4.0, 256), (7.0, 1024)])
def test_each_bit_has_the_exact_law(epsilon: float, d: int) -> None:
    oracle = make_oracle("oue", epsilon=epsilon, domain_size=d)
    assert isinstance(oracle, OptimizedUnaryEncoding)
    assert law_failures(oracle) == []


def fixed_count_bits(rng: Rng, prob: float, size: int, d: int) -> NDArray[np.bool_]:
    """Broken: every report gets exactly round(prob * d) ones (the right mean, no spread)."""
    keys = rng.random((size // d, d))
    ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
    bits: NDArray[np.bool_] = (ranks < round(prob * d)).reshape(-1)
    return bits


@pytest.mark.parametrize(
    ("broken", "check"),
    [
        ("q 5% high", "pooled rate of other bits"),
        ("fixed count", "variance of the count"),
        ("true bit at p = 0.6", "rate of true bit"),
    ],
)
def test_law_checks_reject_a_broken_sampler(
    broken: str, check: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = 64
    oracle = make_oracle("oue", epsilon=1.0, domain_size=d)
    assert isinstance(oracle, OptimizedUnaryEncoding)
    real = unary.sample_bernoulli
    # Break only the other bits' sampler (sample_bernoulli also draws the true bits, with p).
    if broken == "q 5% high":
        monkeypatch.setattr(
            unary, "sample_bernoulli", lambda r, p, s: real(r, p * 1.05 if p < 0.5 else p, s)
        )
    elif broken == "fixed count":
        monkeypatch.setattr(
            unary,
            "sample_bernoulli",
            lambda r, p, s: fixed_count_bits(r, p, s, d) if p < 0.5 else real(r, p, s),
        )
    else:
        monkeypatch.setattr(oracle, "p", 0.6)  # sampled with 0.6, checked against 1/2
    failures = law_failures(oracle, p=0.5)
    assert any(check in failure for failure in failures), failures


# -- estimates at a small q ------------------------------------------------------------------


def test_estimates_at_a_small_q_are_unbiased_with_the_exact_variance() -> None:
    oracle = make_oracle("oue", epsilon=4.0, domain_size=64)
    assert oracle.q < 5 / 256  # the first base-256 digit of q is 4: most 1s need a 2nd byte
    reps = repeat_estimates(oracle, known_counts(2_000, 64), 200, seed=22)
    check_unbiased(reps)
    check_variance(reps)
