"""Count mean sketch: the client's law, the variance's collision term, the audit (and a
broken variant it catches), the wire form and the test vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_checks import ALPHA, variance_ratios, without_fv_term
from scipy import stats

from ldptel.analysis.audit import audit, exact_audit, sampled_audit
from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.cms import CountMeanSketch
from ldptel.client.oracles.sue import SymmetricUnaryEncoding
from ldptel.client.randomness import Rng

VECTORS = Path(__file__).parents[2] / "vectors" / "cms.json"


class KeepsTheTrueEntry(CountMeanSketch):
    """CMS whose client never flips the entry of its own bucket: its parameters (so the
    exact audit) are honest, its reports are not (entry h_j(v) always +1)."""

    def perturb_batch(self, values: Any, rng: Rng) -> ReportBatch:
        batch = super().perturb_batch(values, rng)
        cells = self.buckets(np.asarray(values), batch["j"])
        rows = np.arange(cells.size)
        batch["bits"][rows, cells >> 3] |= (1 << (7 - (cells & 7))).astype(np.uint8)
        return batch


class FlipsForEpsilon(CountMeanSketch):
    """CMS whose bits are randomized response at eps each (the whole budget per entry, twice
    what one report may spend) while it claims eps."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.p, self.q = SymmetricUnaryEncoding.probabilities(2 * self.requested_epsilon)

    @property
    def epsilon(self) -> float:
        return self.requested_epsilon


def test_each_bit_has_the_stated_probability() -> None:
    oracle = CountMeanSketch(epsilon=1.0, domain_size=4, k=8, m=32)
    n = 20_000
    values = np.full(n, 2)
    batch = oracle.perturb_batch(values, np.random.default_rng(3))
    bits = np.unpackbits(batch["bits"], axis=1, count=32).astype(bool)
    own = oracle.buckets(values, batch["j"])
    at_own = bits[np.arange(n), own]
    p, q = oracle.p, oracle.q
    assert q == pytest.approx(1 / (1 + math.exp(0.5)), rel=1e-15) and p + q == pytest.approx(1)
    limit = stats.norm.isf(ALPHA / 4)
    z_own = (at_own.sum() - n * p) / math.sqrt(n * p * (1 - p))
    others = bits.sum() - at_own.sum()
    z_other = (others - n * 31 * q) / math.sqrt(n * 31 * q * (1 - q))
    assert abs(z_own) < limit and abs(z_other) < limit, (z_own, z_other)
    # j is uniform on [0, k).
    assert stats.chisquare(np.bincount(batch["j"], minlength=8)).pvalue > ALPHA


def test_the_collision_term_is_the_f_v_term_and_is_exact() -> None:
    # At m = 4 the hash-collision term (n - n_v)/(m - 1) is a third of an item's variance;
    # dropping it (f_v = 0 for every item) is rejected by the same check.
    oracle = CountMeanSketch(epsilon=4.0, domain_size=3, k=256, m=4)
    counts = np.array([1_800, 100, 100])
    ratios, (low, high) = variance_ratios(oracle, counts, 400, seed=21)
    assert np.all((low < ratios) & (ratios < high)), ratios
    wrong, _ = variance_ratios(without_fv_term(oracle), counts, 400, seed=21)
    assert not low < wrong[0] < high, wrong[0]


def test_variance_is_the_closed_form() -> None:
    oracle = CountMeanSketch(epsilon=2.0, domain_size=3, k=16, m=8)
    c, m, n = oracle.c, 8, 1000
    f = np.array([0.5, 0.3, 0.2])
    want = (m / (m - 1)) ** 2 * n * (c**2 - 1) / 4 + n * (1 - f) / (m - 1)
    assert np.allclose(oracle.variance(n, f), want, rtol=1e-12)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_the_exact_audit_measures_the_claimed_epsilon(epsilon: float) -> None:
    oracle = CountMeanSketch(epsilon=epsilon, domain_size=6, k=64, m=16)
    assert exact_audit(oracle).epsilon == pytest.approx(oracle.epsilon, rel=1e-12)


def test_the_audit_catches_a_client_that_keeps_its_true_entry() -> None:
    oracle = KeepsTheTrueEntry(epsilon=1.0, domain_size=8, k=64, m=16)
    assert exact_audit(oracle).epsilon == pytest.approx(oracle.epsilon)  # honest parameters
    sampled = sampled_audit(oracle, np.random.default_rng(4), samples=50_000, pairs=1)
    assert sampled.lower_bound > 1.0, sampled  # dishonest reports
    assert audit(oracle, np.random.default_rng(4), samples=50_000, sampled_pairs=1).violated


def test_the_audit_catches_a_client_spending_epsilon_per_entry() -> None:
    oracle = FlipsForEpsilon(epsilon=1.0, domain_size=8, k=64, m=16)
    assert exact_audit(oracle).epsilon == pytest.approx(2.0, rel=1e-6)
    result = audit(oracle, np.random.default_rng(5), samples=50_000, sampled_pairs=1)
    assert result.violated and result.sampled_lower_bound is not None
    assert result.sampled_lower_bound > 1.0


def test_vectors() -> None:
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    for case in document["cases"]:
        labels = case["domain"]
        oracle = CountMeanSketch(
            epsilon=case["epsilon"],
            domain_size=len(labels),
            k=case["k"],
            m=case["m"],
            labels=labels,
        )
        assert (oracle.p, oracle.q) == (case["p"], case["q"])
        rows = np.arange(case["k"])
        for v, label in enumerate(labels):
            assert oracle.buckets(np.full(case["k"], v), rows).tolist() == case["hashes"][label]
        reports = [row["report"] for row in case["reports"]]
        batch = oracle.decode(reports)
        assert oracle.encode(batch) == reports
        n = len(reports)
        assert np.allclose(oracle.estimate(oracle.support(batch), n), case["estimate"])
        # The debiased sketch, as the paper's server builds it.
        rows_sum = oracle.debiased_rows(oracle.support(batch), n) * case["k"]
        counts = np.bincount(batch["j"], minlength=case["k"])[:, None]
        sketch = rows_sum - case["k"] * oracle.c * oracle.q * counts
        assert np.allclose(sketch, case["sketch"])
    for bad in document["malformed"]:
        oracle = CountMeanSketch(epsilon=1.0, domain_size=4, k=4, m=16)
        with pytest.raises(ReportError) as caught:
            oracle.decode([bad["report"]])
        assert caught.value.field == f"reports[0].{bad['field']}"
        assert bad["reason"] in caught.value.reason


@pytest.mark.parametrize(
    ("k", "m", "n", "rows_used"),
    [(4, 20, 0, 4), (4, 20, 1, 4), (8, 13, 2000, 3), (64, 1024, 3000, 64), (2, 2, 600, 2)],
)
def test_the_support_counts_each_row_s_set_bits(k: int, m: int, n: int, rows_used: int) -> None:
    # Rows with one report, a few, and more than 255 (the byte counters' limit) in one batch.
    oracle = CountMeanSketch(epsilon=1.0, domain_size=4, k=k, m=m)
    rng = np.random.default_rng(n)
    rows = rng.integers(0, rows_used, n).astype(np.uint16)
    bits = rng.integers(0, 2, (n, m)).astype(bool)
    packed = np.packbits(bits, axis=1)
    expected = np.zeros((k, m), dtype=np.int64)
    for row, report in zip(rows, bits, strict=True):
        expected[row] += report
    support = oracle.support({"j": rows, "bits": packed})
    assert support.dtype == np.int64
    assert support.tolist() == expected.reshape(-1).tolist()
