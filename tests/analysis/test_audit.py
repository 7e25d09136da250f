"""The privacy audit: every registered oracle passes it, and it catches broken ones -- a
false epsilon claim (exact and sampled audits) and a perturb implementation that leaks more
than its parameters say (only the sampled audit can see that: why both exist)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from ldptel.analysis.audit import (
    AuditResult,
    audit,
    audit_pairs,
    binomial_bounds,
    exact_audit,
    sampled_audit,
)
from ldptel.analysis.simulation import build_oracle
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import ORACLES, FrequencyOracle
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.de import DirectEncoding
from ldptel.client.randomness import Rng

NAMES = sorted(ORACLES)
SAMPLES = 100_000


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def overclaiming(name: str, real_epsilon: float, claimed: float, d: int) -> FrequencyOracle:
    """An oracle built with `real_epsilon` whose `epsilon` says `claimed` (a false claim)."""
    honest = build_oracle(name, epsilon=real_epsilon, domain_size=d)
    base: Any = type(honest)
    fake = type(f"Overclaiming{base.__name__}", (base,), {"epsilon": property(lambda _: claimed)})
    honest.__class__ = fake
    return honest


class LeakyDirectEncoding(DirectEncoding):
    """DE whose perturb keeps the true value 10% more often than p says; its parameters
    (and so the exact audit) are unchanged."""

    def perturb_batch(self, values: Any, rng: Rng) -> ReportBatch:
        batch = super().perturb_batch(values, rng)
        leak = rng.random(len(batch["y"])) < 0.1
        batch["y"][leak] = np.asarray(values)[leak]
        return batch


# -- every registered oracle keeps its claim -----------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("epsilon", "domain_size"),
    [(0.5, 2), (2.0, 16), pytest.param(1.0, 64, marks=pytest.mark.slow)],
)
def test_every_oracle_passes_its_audit(name: str, epsilon: float, domain_size: int) -> None:
    oracle = build_oracle(name, epsilon=epsilon, domain_size=domain_size)
    result = audit(oracle, rng(1), samples=SAMPLES, sampled_pairs=2)
    assert not result.violated, result
    assert result.exact_epsilon is not None and result.sampled_lower_bound is not None
    assert result.exact_epsilon <= oracle.epsilon * (1 + 1e-9)
    assert result.sampled_lower_bound <= oracle.epsilon


@pytest.mark.parametrize("name", NAMES)
def test_audit_events_capture_the_privacy_loss(name: str) -> None:
    # The events must carry (nearly) all of the loss, or a broken perturb could hide in
    # what they do not look at.
    oracle = build_oracle(name, epsilon=1.0, domain_size=16)
    assert exact_audit(oracle).epsilon >= 0.5 * oracle.epsilon
    sampled = sampled_audit(oracle, rng(2), samples=SAMPLES, pairs=2)
    assert sampled.epsilon == pytest.approx(exact_audit(oracle).epsilon, abs=0.15)


# -- and the audit catches broken oracles --------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_false_epsilon_claim_is_caught_by_the_sampled_audit(name: str) -> None:
    oracle = overclaiming(name, real_epsilon=1.5, claimed=1.0, d=8)
    sampled = sampled_audit(oracle, rng(3), samples=SAMPLES, pairs=2)
    assert sampled.lower_bound > 1.0, sampled
    result = audit(oracle, rng(3), samples=SAMPLES, sampled_pairs=2)
    assert result.violated
    assert result.exact_epsilon is not None and result.exact_epsilon > 1.0


def test_a_leaky_perturb_is_caught_by_the_sampled_audit_only() -> None:
    oracle = LeakyDirectEncoding(epsilon=1.0, domain_size=16)
    exact = exact_audit(oracle)
    assert exact.epsilon == pytest.approx(1.0)  # the parameters are honest...
    sampled = sampled_audit(oracle, rng(4), samples=SAMPLES, pairs=2)
    assert sampled.lower_bound > 1.0  # ...the code is not
    assert audit(oracle, rng(4), samples=SAMPLES, sampled_pairs=2).violated


def test_the_audit_is_tight_on_both_sides() -> None:
    # Like opendp's check(1, log 9) / check(1, log 8.999): DE at epsilon = ln 9 measures
    # ln 9 exactly; a claim just below it is refuted, the claim itself is not.
    oracle = DirectEncoding(epsilon=math.log(9), domain_size=4)
    assert exact_audit(oracle).epsilon == pytest.approx(math.log(9), rel=1e-12)
    below = overclaiming("de", math.log(9), math.log(8.999), 4)
    assert audit(below, rng(5), sampled=False).violated
    assert not audit(oracle, rng(5), sampled=False).violated


# -- the parts ------------------------------------------------------------------------------


def test_binomial_bounds_cover_and_are_close_to_clopper_pearson() -> None:
    k, n, delta = np.array([0, 1, 30, 5_000, 99_999, 100_000]), 100_000, 1e-4
    lower, upper = binomial_bounds(k, n, delta)
    cp_lower = np.where(k > 0, stats.beta.ppf(delta, np.maximum(k, 1), n - k + 1), 0.0)
    cp_upper = np.where(k < n, stats.beta.ppf(1 - delta, k + 1, np.maximum(n - k, 1)), 1.0)
    # Chernoff bounds are a little wider than Clopper-Pearson, never narrower.
    assert np.all(lower <= cp_lower + 1e-12) and np.all(upper >= cp_upper - 1e-12)
    assert np.all(upper - lower <= 1.5 * (cp_upper - cp_lower) + 1e-9)


def test_binomial_bounds_hold_with_the_stated_probability() -> None:
    # 20,000 binomial draws at delta = 0.01: each bound fails about <= 1% of the time.
    p, n, delta = 0.03, 2_000, 0.01
    k = rng(6).binomial(n, p, size=20_000)
    lower, upper = binomial_bounds(k, n, delta)
    assert np.mean(lower > p) <= delta and np.mean(upper < p) <= delta


def test_audit_pairs_are_all_pairs_when_few_else_a_sample() -> None:
    assert audit_pairs(4, 100, rng(7)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    sample = audit_pairs(1000, 50, rng(7))
    assert len(set(sample)) == 50 and (0, 1) in sample and (0, 999) in sample
    assert all(0 <= v < w < 1000 for v, w in sample)


def test_audit_result_is_json_ready() -> None:
    result = audit(DirectEncoding(epsilon=1.0, domain_size=3), rng(8), samples=1_000)
    data = result.to_dict()
    assert data["verdict"] == "ok" and data["claimed_epsilon"] == pytest.approx(1.0)
    assert isinstance(result, AuditResult)


def test_audit_parameters_are_validated() -> None:
    oracle = DirectEncoding(epsilon=1.0, domain_size=3)
    with pytest.raises(ParameterError, match="confidence"):
        sampled_audit(oracle, rng(9), confidence=1.0)
    with pytest.raises(ParameterError, match="samples"):
        sampled_audit(oracle, rng(9), samples=10)


def test_the_sampled_audit_reports_its_progress_in_reports_drawn() -> None:
    oracle = DirectEncoding(epsilon=1.0, domain_size=4)
    seen: list[tuple[int, int]] = []
    sampled_audit(
        oracle, np.random.default_rng(1), samples=1000, pairs=2, progress=lambda *p: seen.append(p)
    )
    assert seen[-1] == (4000, 4000)  # 2 pairs x 2 directions x 1000 samples
    assert [done for done, _ in seen] == sorted({done for done, _ in seen})
