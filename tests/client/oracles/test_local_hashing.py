"""Local hashing (BLH and OLH share it): support against a per-pair reference, the wire form,
labels, unbiasedness and variance vs theory, and the privacy audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from contract_checks import Z_LIMIT, event_z, variance_ratios, z_scores
from numpy.typing import NDArray

import ldptel.client.oracles.local_hashing as local_hashing
from ldptel.analysis.audit import exact_audit, sampled_audit
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.hashing import item_key, lh_hash_scalar
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.base import ReportBatch
from ldptel.client.oracles.blh import BinaryLocalHashing
from ldptel.client.oracles.local_hashing import LocalHashing
from ldptel.client.oracles.olh import OptimizedLocalHashing

COUNTS = np.array([4000, 2500, 1500, 1000, 600, 300, 100, 0], dtype=np.int64)
LABELS = ["apple", "banana", "", "日本語", "🙂", "naïve café", "cherry", "date"]


def naive_support(oracle: LocalHashing, batch: ReportBatch) -> NDArray[np.int64]:
    """The definition, one (report, item) pair at a time through the xxhash package."""
    keys = [item_key(label) for label in oracle.labels]
    support = np.zeros(oracle.domain_size, dtype=np.int64)
    for seed, y in zip(batch["seed"].tolist(), batch["y"].tolist(), strict=True):
        for v, key in enumerate(keys):
            support[v] += lh_hash_scalar(key, seed) % oracle.g == y
    return support


def random_batch(oracle: LocalHashing, n: int, seed: int) -> ReportBatch:
    rng = np.random.default_rng(seed)
    return oracle.perturb_batch(rng.integers(0, oracle.domain_size, n), rng)


class OtherBucketQStar(OptimizedLocalHashing):
    """A plausible mistake: q* taken as k-RR's q = (1-p)/(g-1) instead of 1/g."""

    @property
    def q_star(self) -> float:
        return self.q_other


class OverSharing(OptimizedLocalHashing):
    """Keeps the true bucket as often as 2 epsilon allows, yet claims epsilon."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.p = 1.0 / (1.0 + (self.g - 1) * math.exp(-2 * self.requested_epsilon))
        self.q_other = (1.0 - self.p) / (self.g - 1)

    @property
    def epsilon(self) -> float:
        return self.requested_epsilon


# -- support ---------------------------------------------------------------------------------
@pytest.mark.parametrize("g", [2, 4, 5, 21, 56, 1000, 2**31 + 1, 2**32 - 1])
def test_support_equals_the_per_pair_definition(g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=len(LABELS), g=g, labels=LABELS)
    batch = random_batch(oracle, 400, g % 997)
    assert np.array_equal(oracle.support(batch), naive_support(oracle, batch))


@pytest.mark.parametrize(("chunk_pairs", "d"), [(7, 13), (64, 40), (1 << 16, 3)])
def test_support_is_exact_across_chunks_and_threads(
    monkeypatch: pytest.MonkeyPatch, chunk_pairs: int, d: int
) -> None:
    # Tiny chunks split the domain into column blocks (ragged last block) and the reports
    # into ragged row blocks; a zero threshold sends every batch through the thread pool.
    monkeypatch.setattr(local_hashing, "_CHUNK_PAIRS", chunk_pairs)
    monkeypatch.setattr(local_hashing, "_PARALLEL_PAIRS", 0)
    monkeypatch.setattr(local_hashing, "_WORKERS", 3)
    oracle = OptimizedLocalHashing(epsilon=2.0, domain_size=d, g=5)
    batch = random_batch(oracle, 301, d)
    assert np.array_equal(oracle.support(batch), naive_support(oracle, batch))


def test_support_counts_past_a_chunks_partial_sums() -> None:
    # Every report supports item 0, so each chunk's column 0 counts all of its rows (at
    # d = 2, 2^15 rows a chunk: past uint8, within the uint16 partial sums).
    oracle = BinaryLocalHashing(epsilon=1.0, domain_size=2)
    n = 100_000
    seeds = np.random.default_rng(1).integers(0, 2**32, n).astype(np.uint32)
    batch = {"seed": seeds, "y": oracle.buckets(np.zeros(n, dtype=np.int64), seeds)}
    assert oracle.support(batch)[0] == n


def test_support_of_batches_adds_and_of_nothing_is_zero() -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=30)
    batch = random_batch(oracle, 500, 2)
    first = {k: c[:200] for k, c in batch.items()}
    rest = {k: c[200:] for k, c in batch.items()}
    assert np.array_equal(oracle.support(first) + oracle.support(rest), oracle.support(batch))
    empty = {k: c[:0] for k, c in batch.items()}
    assert np.array_equal(oracle.support(empty), np.zeros(30, dtype=np.int64))


def test_perturb_hashes_the_true_value_as_the_protocol_says() -> None:
    # With 1 - p = 6 e^-20 ~ 1e-8 (eps = 20), y is the bucket of the value's label (the
    # seeded draw keeps every one of these reports).
    oracle = OptimizedLocalHashing(epsilon=20.0, domain_size=len(LABELS), g=7, labels=LABELS)
    values = np.arange(len(LABELS)).repeat(5)
    batch = oracle.perturb_batch(values, np.random.default_rng(4))
    expected = [
        lh_hash_scalar(item_key(LABELS[v]), s) % 7
        for v, s in zip(values.tolist(), batch["seed"].tolist(), strict=True)
    ]
    assert batch["y"].tolist() == expected


@pytest.mark.parametrize("g", [2, 5])
def test_perturbed_buckets_are_g_ary_randomized_response(g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=4, g=g)
    n = 200_000
    batch = oracle.perturb_batch(np.zeros(n, dtype=np.int64), np.random.default_rng(8))
    x = oracle.buckets(np.zeros(n, dtype=np.int64), batch["seed"]).astype(np.int64)
    # The offset of y from x: 0 with probability p, each other offset with q_other.
    offsets = np.bincount((batch["y"].astype(np.int64) - x) % g, minlength=g)
    expected = n * np.array([oracle.p] + [oracle.q_other] * (g - 1))
    z = (offsets - expected) / np.sqrt(expected * (1 - expected / n))
    assert np.max(np.abs(z)) < Z_LIMIT, z
    assert batch["seed"].dtype == np.uint32 and batch["y"].dtype == np.uint32


# -- wire ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["blh", "olh"])
def test_wire_and_storage_round_trips(name: str) -> None:
    oracle = make_oracle(name, epsilon=2.0, domain_size=20)
    batch = random_batch(oracle, 50, 3)  # type: ignore[arg-type]
    wire = oracle.encode(batch)
    assert all(set(r) == {"seed", "y"} and type(r["seed"]) is int for r in wire)
    decoded = oracle.decode(wire)
    unpacked = oracle.unpack(oracle.pack(decoded), 50)
    for column in ("seed", "y"):
        assert np.array_equal(decoded[column], batch[column])
        assert np.array_equal(unpacked[column], batch[column])
    assert np.array_equal(oracle.support(unpacked), oracle.support(batch))


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ("not an object", "report"),
        ({"y": 1}, "seed"),
        ({"seed": 1}, "y"),
        ({"seed": -1, "y": 0}, "seed"),
        ({"seed": 2**32, "y": 0}, "seed"),
        ({"seed": 1.0, "y": 0}, "seed"),
        ({"seed": True, "y": 0}, "seed"),
        ({"seed": "7", "y": 0}, "seed"),
        ({"seed": None, "y": 0}, "seed"),
        ({"seed": 7, "y": 5}, "y"),
        ({"seed": 7, "y": -1}, "y"),
        ({"seed": 7, "y": 2.0}, "y"),
        ({"seed": 7, "y": False}, "y"),
        ({"seed": 7, "y": [1]}, "y"),
        ({"seed": 2**32 - 1, "y": 4}, None),
        ({"seed": 0, "y": 0}, None),
    ],
)
def test_malformed_reports_are_rejected_naming_the_field(report: object, field: str | None) -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=10, g=5)
    if field is None:
        assert oracle.decode([report])["seed"].shape == (1,)
        return
    with pytest.raises(ReportError, match=rf"reports\[1\]\.{field}"):
        oracle.decode([{"seed": 3, "y": 0}, report])


def test_a_batch_must_be_a_list() -> None:
    with pytest.raises(ReportError, match="reports"):
        BinaryLocalHashing(epsilon=1.0, domain_size=10).decode({"seed": 1, "y": 0})


# -- labels ----------------------------------------------------------------------------------
def test_default_labels_are_the_indices_as_strings() -> None:
    oracle = BinaryLocalHashing(epsilon=1.0, domain_size=3)
    assert oracle.labels == ["0", "1", "2"]
    named = BinaryLocalHashing(epsilon=1.0, domain_size=3, labels=["0", "1", "2"])
    batch = random_batch(oracle, 100, 5)
    assert np.array_equal(oracle.support(batch), named.support(batch))


@pytest.mark.parametrize(
    "labels", [["a", "b"], ["a", "b", "c", "d"], ["a", "a", "b"], ["a", 1, "b"], "abc"]
)
def test_labels_are_validated(labels: object) -> None:
    with pytest.raises(ParameterError, match="labels"):
        OptimizedLocalHashing(epsilon=1.0, domain_size=3, labels=labels)  # type: ignore[arg-type]


# -- estimates -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "eps", "g"),
    [("blh", 1.0, None), ("olh", 1.0, None), ("olh", 4.0, None), ("olh", 0.5, 7)],
)
def test_estimates_are_unbiased_within_their_standard_errors(
    name: str, eps: float, g: int | None
) -> None:
    params = {} if g is None else {"g": g}
    oracle = make_oracle(name, epsilon=eps, domain_size=COUNTS.size, **params)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(int(eps * 100) + len(name)))
    assert np.max(np.abs(z)) < Z_LIMIT, z


def test_the_unbiasedness_check_catches_a_wrong_q_star() -> None:
    oracle = OtherBucketQStar(epsilon=1.0, domain_size=COUNTS.size)
    z = z_scores(oracle, COUNTS * 10, np.random.default_rng(11))
    assert np.max(np.abs(z)) > Z_LIMIT


@pytest.mark.parametrize(("name", "eps"), [("blh", 1.0), ("olh", 4.0)])
def test_variance_matches_the_exact_formula(name: str, eps: float) -> None:
    oracle = make_oracle(name, epsilon=eps, domain_size=COUNTS.size)
    ratios, (low, high) = variance_ratios(oracle, COUNTS // 4, 300, np.random.default_rng(12))
    assert np.all((low < ratios) & (ratios < high)), ratios


def test_the_variance_check_catches_a_missing_frequency_term() -> None:
    # At eps = 4 (g = 56) the f_v term dominates the variance of frequent items.
    oracle = OptimizedLocalHashing(epsilon=4.0, domain_size=COUNTS.size)
    ratios, (low, high) = variance_ratios(oracle, COUNTS // 4, 300, np.random.default_rng(12))
    n = int(COUNTS.sum() // 4)
    rare_only = oracle.variance(n) / oracle.variance(n, (COUNTS // 4) / n)
    assert not np.all((low < ratios * rare_only) & (ratios * rare_only < high))


def test_olh_variance_at_the_optimal_g_is_the_papers() -> None:
    # Wang et al. 2017, Sec. 4.4: with g = e^eps + 1, Var / n = 4 e^eps / (e^eps - 1)^2;
    # g is rounded, so allow a little.
    for eps in (1.0, 2.0, 4.0):
        oracle = OptimizedLocalHashing(epsilon=eps, domain_size=16)
        e = math.exp(eps)
        assert oracle.variance(1)[0] == pytest.approx(4 * e / (e - 1) ** 2, rel=0.02)


def test_blh_variance_is_the_papers() -> None:
    e = math.exp(1.5)
    oracle = BinaryLocalHashing(epsilon=1.5, domain_size=16)
    assert oracle.variance(1)[0] == pytest.approx((e + 1) ** 2 / (e - 1) ** 2, rel=1e-12)


# -- privacy ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("eps", "g"), [(1.0, 2), (1.0, 4), (3.0, 21), (0.3, 9)])
def test_epsilon_is_derived_from_p_and_g(eps: float, g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=eps, domain_size=8, g=g)
    assert oracle.epsilon == pytest.approx(eps, rel=1e-12)
    p = oracle.p
    assert math.log(p * (g - 1) / (1 - p)) == pytest.approx(eps, rel=1e-9)
    assert (oracle.p_star, oracle.q_star) == (p, 1 / g)


@pytest.mark.parametrize(("eps", "g"), [(1.0, 2), (1.0, 4), (2.5, 13)])
def test_exact_audit_measures_the_claimed_epsilon(eps: float, g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=eps, domain_size=6, g=g)
    for v, w in [(0, 1), (4, 2), (3, 3)]:
        assert oracle.audit_probabilities(v, w).sum() == pytest.approx(1.0)
    assert exact_audit(oracle).epsilon == pytest.approx(eps, rel=1e-9)


def test_audit_events_are_symmetric_in_the_pair() -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=10, g=3)
    batch = random_batch(oracle, 2000, 9)
    events = oracle.audit_events(batch, 2, 7)
    assert np.array_equal(events, oracle.audit_events(batch, 7, 2))
    assert set(np.unique(events).tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("g", [2, 5])
def test_audit_events_agree_with_their_exact_probabilities(g: int) -> None:
    oracle = OptimizedLocalHashing(epsilon=1.0, domain_size=10, g=g)
    for v, w in [(2, 7), (7, 2)]:
        z = event_z(oracle, v, w, 50_000, np.random.default_rng(5))
        assert np.max(np.abs(z)) < Z_LIMIT, z


def test_audits_catch_an_oversharing_oracle() -> None:
    oracle = OverSharing(epsilon=1.0, domain_size=8, g=4)
    assert exact_audit(oracle).epsilon > 1.5
    sampled = sampled_audit(oracle, np.random.default_rng(6), samples=50_000, pairs=1)
    assert sampled.lower_bound > oracle.epsilon
