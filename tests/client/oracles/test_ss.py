"""Subset Selection: parameters, unbiasedness and variance vs theory, privacy, wire, vectors."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from contract_checks import Z_LIMIT, event_z, variance_ratios, z_scores
from scipy import stats

from ldptel.analysis.audit import exact_audit, sampled_audit
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.oracles.ss import SubsetSelection, default_subset_size
from ldptel.client.randomness import Rng, SecureRandom

VECTORS = Path(__file__).parents[2] / "vectors" / "ss.json"
COUNTS = np.array([4000, 2500, 1500, 1000, 600, 300, 100, 0], dtype=np.int64)
#: One item holds 90% of the reports, so the f_v term of the variance matters.
SKEWED = np.array([2700, 100, 60, 50, 40, 30, 20, 0], dtype=np.int64)


class NaiveQStar(SubsetSelection):
    """A plausible-looking mistake: q* = k/d (as if the subset were uniform)."""

    @property
    def q_star(self) -> float:
        return self.k / self.domain_size


class OverSharing(SubsetSelection):
    """Includes the true value more often than the claimed epsilon allows."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        e = math.exp(2 * self.requested_epsilon)
        self.p = self.k * e / (self.k * e + self.domain_size - self.k)

    @property
    def epsilon(self) -> float:
        return self.requested_epsilon


def test_default_subset_size_follows_the_paper() -> None:
    assert default_subset_size(1024, 1.0) == round(1024 / (math.e + 1))
    assert default_subset_size(16, 8.0) == 1  # never empty
    assert default_subset_size(2, 0.01) == 1  # never the whole domain
    assert SubsetSelection(epsilon=1.0, domain_size=100).k == 27


@pytest.mark.parametrize("k", [0, 8, -1, 2.5, True])
def test_subset_size_is_validated(k: object) -> None:
    with pytest.raises(ParameterError, match="k"):
        SubsetSelection(epsilon=1.0, domain_size=8, k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize(("d", "eps", "k"), [(8, 1.0, None), (16, 0.5, 1), (16, 3.0, 15)])
def test_epsilon_and_pure_probabilities(d: int, eps: float, k: int | None) -> None:
    oracle = SubsetSelection(epsilon=eps, domain_size=d, k=k)
    assert oracle.epsilon == pytest.approx(eps, rel=1e-12)
    # Each report holds exactly k items: p* + (d-1) q* = k.
    assert oracle.p_star + (d - 1) * oracle.q_star == pytest.approx(oracle.k)


@pytest.mark.parametrize(("eps", "k"), [(1.0, None), (0.5, 3), (4.0, 1)])
def test_estimates_are_unbiased_within_their_standard_errors(eps: float, k: int | None) -> None:
    oracle = SubsetSelection(epsilon=eps, domain_size=COUNTS.size, k=k)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(11))
    assert np.max(np.abs(z)) < Z_LIMIT, z


def test_the_unbiasedness_check_catches_a_wrong_q_star() -> None:
    oracle = NaiveQStar(epsilon=1.0, domain_size=COUNTS.size)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(11))
    assert np.max(np.abs(z)) > Z_LIMIT


def test_variance_matches_the_exact_formula() -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=SKEWED.size)
    ratios, (low, high) = variance_ratios(oracle, SKEWED, 300, np.random.default_rng(12))
    assert np.all((low < ratios) & (ratios < high)), ratios


def test_the_variance_check_catches_a_missing_frequency_term() -> None:
    # Wang et al.'s eq. (2) without its f_v term understates the heavy item's variance by 30%.
    oracle = SubsetSelection(epsilon=1.0, domain_size=SKEWED.size)
    ratios, (low, high) = variance_ratios(oracle, SKEWED, 300, np.random.default_rng(12))
    n = int(SKEWED.sum())
    without_term = ratios * oracle.variance(n, SKEWED / n) / oracle.variance(n)
    assert not np.all((low < without_term) & (without_term < high)), without_term


def test_every_report_is_a_k_subset() -> None:
    oracle = SubsetSelection(epsilon=0.7, domain_size=37)
    batch = oracle.perturb_batch(np.arange(37).repeat(50), np.random.default_rng(3))
    bits = np.unpackbits(batch["bits"], axis=1, count=37)
    assert np.all(bits.sum(axis=1) == oracle.k)
    assert oracle.decode(oracle.encode(batch))["bits"].tobytes() == batch["bits"].tobytes()


def subset_p_value(
    oracle: SubsetSelection, value: int, seed: int, claimed_p: float, rng: Rng | None = None
) -> float:
    """Chi-square fit of the reported subsets (all of them) for one true value to
    P[S | v] = p / C(d-1, k-1) if v in S, else (1-p) / C(d-1, k)."""
    d, k, n = oracle.domain_size, oracle.k, 120_000
    batch = oracle.perturb_batch(np.full(n, value), rng or np.random.default_rng(seed))
    bits = np.unpackbits(batch["bits"], axis=1, count=d).astype(np.int64)
    codes = bits @ (1 << np.arange(d))
    subsets = [sum(1 << i for i in c) for c in itertools.combinations(range(d), k)]
    observed = np.array([np.count_nonzero(codes == code) for code in subsets])
    with_v = np.array([(code >> value) & 1 for code in subsets], dtype=bool)
    law = np.where(
        with_v, claimed_p / math.comb(d - 1, k - 1), (1 - claimed_p) / math.comb(d - 1, k)
    )
    assert observed.sum() == n
    return float(stats.chisquare(observed, law * n).pvalue)


# value = d - 1: the true value is the item that position v stands for.
@pytest.mark.parametrize(
    ("d", "k", "value"), [(6, 2, 0), (6, 3, 5), (7, 1, 3), (5, 4, 2), (9, 2, 8), (8, 7, 3)]
)
def test_every_subset_has_exactly_its_probability(d: int, k: int, value: int) -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=d, k=k)
    assert subset_p_value(oracle, value, seed=d * 10 + k, claimed_p=oracle.p) > 1e-4


def test_the_subset_law_check_detects_a_slightly_wrong_inclusion_probability() -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=6, k=2)
    assert subset_p_value(oracle, 0, seed=62, claimed_p=oracle.p * 1.03) < 1e-4


def test_reports_from_os_randomness_have_exactly_their_probability() -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=7, k=3)
    assert subset_p_value(oracle, 1, seed=0, claimed_p=oracle.p, rng=SecureRandom()) > 1e-4


@pytest.mark.parametrize("rng", [np.random.default_rng(13), SecureRandom()], ids=["numpy", "os"])
def test_large_subsets_are_k_subsets_with_uniform_other_items(rng: Rng) -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=1024)
    d, k, n, value = oracle.domain_size, oracle.k, 20_000, 700
    bits = np.unpackbits(oracle.perturb_batch(np.full(n, value), rng)["bits"], axis=1)
    assert np.all(bits[:, d:] == 0) and np.all(bits.sum(axis=1) == k)
    true_bits = bits[:, value].mean()
    assert abs(true_bits - oracle.p) < Z_LIMIT * math.sqrt(oracle.p * (1 - oracle.p) / n)
    # Other items: Pearson's statistic over their counts. Within a row, memberships of a
    # uniform subset of q (d-1) items are correlated -q(1-q)/(d-2) apiece, which scales
    # the statistic by (1-q) (d-1)/(d-2) from a chi-square(d-2).
    counts = np.delete(bits[:, :d].sum(axis=0), value)
    q = counts.sum() / (n * (d - 1))
    pearson = float(((counts - counts.mean()) ** 2).sum() / counts.mean())
    pearson /= (1 - q) * (d - 1) / (d - 2)
    assert stats.chi2.sf(pearson, d - 2) > 1e-4
    assert stats.chi2.cdf(pearson, d - 2) > 1e-4  # not too uniform either


@pytest.mark.parametrize(("d", "eps"), [(8, 1.0), (12, 3.0)])
def test_exact_audit_measures_the_claimed_epsilon(d: int, eps: float) -> None:
    oracle = SubsetSelection(epsilon=eps, domain_size=d)
    for v, w in [(0, 1), (3, 2)]:
        assert oracle.audit_probabilities(v, w).sum() == pytest.approx(1.0)
    assert exact_audit(oracle).epsilon == pytest.approx(eps, rel=1e-9)


def test_audit_events_agree_with_their_exact_probabilities() -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=10)
    for v, w in [(2, 7), (7, 2)]:
        z = event_z(oracle, v, w, 50_000, np.random.default_rng(5))
        assert np.max(np.abs(z)) < Z_LIMIT, z


def test_audits_catch_an_oversharing_oracle() -> None:
    oracle = OverSharing(epsilon=1.0, domain_size=8)
    assert exact_audit(oracle).epsilon > 1.5
    sampled = sampled_audit(oracle, np.random.default_rng(6), samples=50_000, pairs=1)
    assert sampled.lower_bound > oracle.epsilon


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ("not an object", "report"),
        ({}, "bits"),
        ({"bits": 7}, "bits"),
        ({"bits": "!!!!"}, "bits"),
        ({"bits": "AAAA"}, "bits"),  # 3 bytes for 10 bits
        ({"bits": "AEA="}, "bits"),  # padding bit set (bit 10 of 16)
        ({"bits": "wAA="}, "bits"),  # items 0 and 1: two bits, k = 3
        ({"bits": "4AA="}, None),  # items 0, 1, 2: valid
    ],
)
def test_malformed_reports_are_rejected(report: object, field: str | None) -> None:
    oracle = SubsetSelection(epsilon=1.0, domain_size=10, k=3)
    if field is None:
        assert oracle.decode([report])["bits"].shape == (1, 2)
        return
    with pytest.raises(ReportError, match=rf"reports\[0\]\.{field}"):
        oracle.decode([report])


def test_a_batch_must_be_a_list() -> None:
    with pytest.raises(ReportError, match="reports"):
        SubsetSelection(epsilon=1.0, domain_size=10).decode({"bits": "4AA="})


def test_vectors() -> None:
    for case in json.loads(VECTORS.read_text())["cases"]:
        oracle = SubsetSelection(epsilon=case["epsilon"], domain_size=case["domain_size"])
        assert oracle.k == case["k"]
        assert oracle.p_star == pytest.approx(case["p"], rel=1e-12)
        assert oracle.q_star == pytest.approx(case["q_star"], rel=1e-12)
        bits = np.zeros((1, oracle.domain_size), dtype=np.uint8)
        bits[0, case["items"]] = 1
        batch = {"bits": np.packbits(bits, axis=1)}
        assert oracle.encode(batch) == [case["report"]]
        assert (
            np.flatnonzero(oracle.support(oracle.decode([case["report"]]))).tolist()
            == case["items"]
        )
