"""Hadamard count mean sketch: the client's law, the two estimate paths, the variance, the
audit (and a broken variant it catches), the wire form and the test vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_checks import ALPHA, variance_ratios
from scipy import stats

from ldptel.analysis.audit import audit, exact_audit, sampled_audit
from ldptel.client.errors import ReportError
from ldptel.client.hashing import item_keys
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.hcms import HadamardCountMeanSketch
from ldptel.client.oracles.sketch import SketchOracle
from ldptel.client.randomness import Rng

VECTORS = Path(__file__).parents[2] / "vectors" / "hcms.json"


class LeakyColumns(HadamardCountMeanSketch):
    """HCMS whose client, a tenth of the time, reports column l = 1 with its true sign
    unflipped: the parameters (so the exact audit) are honest, the reports leak."""

    def perturb_batch(self, values: Any, rng: Rng) -> ReportBatch:
        batch = super().perturb_batch(values, rng)
        leak = rng.random(batch["l"].size) < 0.1
        cells = self.buckets(np.asarray(values), batch["j"])
        batch["l"][leak] = 1
        batch["bit"][leak] = self.signs(cells[leak], np.ones(int(leak.sum()), dtype=np.int64))
        return batch


def test_the_sign_is_kept_with_the_stated_probability() -> None:
    oracle = HadamardCountMeanSketch(epsilon=1.0, domain_size=4, k=8, m=16)
    n = 40_000
    values = np.full(n, 1)
    batch = oracle.perturb_batch(values, np.random.default_rng(3))
    true_sign = oracle.signs(oracle.buckets(values, batch["j"]), batch["l"])
    kept = np.count_nonzero(true_sign == batch["bit"].astype(bool))
    keep = 1 - oracle.flip
    assert keep == pytest.approx(math.e / (math.e + 1), abs=1e-15)
    assert abs(kept - n * keep) / math.sqrt(n * keep * (1 - keep)) < stats.norm.isf(ALPHA / 2)
    for column, size in (("j", 8), ("l", 16)):
        assert stats.chisquare(np.bincount(batch[column], minlength=size)).pvalue > ALPHA / 2


@pytest.mark.parametrize("reports", [30, 3_000])
def test_the_direct_and_transformed_estimates_agree(reports: int) -> None:
    # Few reports: the estimate sums each report cell's H[l, h_j(v)]; many: one FWHT per
    # row. Both are the paper's sum_j M[j, h_j(v)].
    oracle = HadamardCountMeanSketch(epsilon=2.0, domain_size=40, k=16, m=64)
    values = np.random.default_rng(6).integers(0, 40, reports)
    support = oracle.support(oracle.perturb_batch(values, np.random.default_rng(7)))
    keys = item_keys(oracle.labels)
    lanes = oracle._lane0, oracle._lane1
    direct = oracle.cell_sums(support, reports, *lanes)
    transformed = SketchOracle.cell_sums(oracle, support, reports, *lanes)
    assert np.allclose(direct, transformed)
    assert np.allclose(
        oracle.estimate_keys(support, reports, keys), oracle.estimate(support, reports)
    )


def test_variance_is_the_closed_form_and_matches_repetitions() -> None:
    oracle = HadamardCountMeanSketch(epsilon=1.0, domain_size=3, k=64, m=4)
    c, m, n = oracle.c, 4, 1000
    f = np.array([0.5, 0.3, 0.2])
    want = (m / (m - 1)) ** 2 * (n * c**2 - n * f - n * (1 - f) / m**2)
    assert np.allclose(oracle.variance(n, f), want, rtol=1e-12)
    ratios, (low, high) = variance_ratios(oracle, np.array([1_500, 400, 100]), 300, seed=8)
    assert np.all((low < ratios) & (ratios < high)), ratios


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_the_exact_audit_measures_the_claimed_epsilon(epsilon: float) -> None:
    oracle = HadamardCountMeanSketch(epsilon=epsilon, domain_size=6, k=64, m=16)
    assert exact_audit(oracle).epsilon == pytest.approx(oracle.epsilon, rel=1e-12)


def test_the_audit_catches_a_client_that_leaks_its_sign() -> None:
    oracle = LeakyColumns(epsilon=1.0, domain_size=8, k=64, m=16)
    assert exact_audit(oracle).epsilon == pytest.approx(oracle.epsilon)  # honest parameters
    sampled = sampled_audit(oracle, np.random.default_rng(4), samples=50_000, pairs=1)
    assert sampled.lower_bound > 1.0, sampled
    assert audit(oracle, np.random.default_rng(4), samples=50_000, sampled_pairs=1).violated


def test_vectors() -> None:
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    for case in document["cases"]:
        labels = case["domain"]
        oracle = HadamardCountMeanSketch(
            epsilon=case["epsilon"],
            domain_size=len(labels),
            k=case["k"],
            m=case["m"],
            labels=labels,
        )
        assert oracle.flip == case["flip"]
        rows = np.arange(case["k"])
        for v, label in enumerate(labels):
            assert oracle.buckets(np.full(case["k"], v), rows).tolist() == case["hashes"][label]
        reports = [row["report"] for row in case["reports"]]
        batch = oracle.decode(reports)
        assert oracle.encode(batch) == reports
        signs = oracle.signs(
            oracle.buckets(np.array([r["index"] for r in case["reports"]]), batch["j"]), batch["l"]
        )
        assert [bool(s) for s in signs] == [r["true_sign"] == 1 for r in case["reports"]]
        n = len(reports)
        support = oracle.support(batch)
        assert np.allclose(oracle.estimate(support, n), case["estimate"])
        sketch = oracle.debiased_rows(support, n) * case["k"]  # M = M_H H, the paper's
        assert np.allclose(sketch, case["sketch"])
    for bad in document["malformed"]:
        oracle = HadamardCountMeanSketch(epsilon=1.0, domain_size=4, k=4, m=8)
        with pytest.raises(ReportError) as caught:
            oracle.decode([bad["report"]])
        assert caught.value.field == f"reports[0].{bad['field']}"
        assert bad["reason"] in caught.value.reason
