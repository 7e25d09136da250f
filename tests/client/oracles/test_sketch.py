"""What the two sketch oracles (cms, hcms) share: parameters, the hash family of the protocol,
a support that needs no candidate list, and a family that behaves like a random one."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import xxhash
from contract_checks import repeat_estimates
from numpy.typing import NDArray
from scipy import stats

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_keys
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.sketch import DEFAULT_K, DEFAULT_M, SketchOracle

NAMES = ["cms", "hcms"]


def sketch(name: str, **params: Any) -> SketchOracle:
    params.setdefault("epsilon", 2.0)
    params.setdefault("domain_size", 8)
    oracle = make_oracle(name, **params)
    assert isinstance(oracle, SketchOracle)
    return oracle


@pytest.mark.parametrize("name", NAMES)
def test_defaults_are_fixed_params_so_a_campaign_keeps_them(name: str) -> None:
    oracle = sketch(name)
    assert (oracle.k, oracle.m) == (DEFAULT_K, DEFAULT_M) == (1024, 1024)
    assert oracle.fixed_params() == {"k": 1024, "m": 1024}
    config = CampaignConfig.from_dict(
        {"name": "words", "oracle": name, "epsilon": 2.0, "domain": ["a", "b", "c"]}
    ).as_created()
    # and beside them what is derived from epsilon (the probabilities), as the oracle has it
    assert config.params == {"k": 1024, "m": 1024, **oracle.derived_params()}


def test_the_aggregator_counts_a_sketch_by_the_row_a_report_touches() -> None:
    # Its chunks are sized by the cells support() touches per report (aggregator/shard.py),
    # not by the k m (or 2 k m) cells of the whole sketch: CMS's per-report temporaries are
    # its 128 packed bytes and 16 bytes of sort keys (a row's unpacked bits are bounded).
    assert sketch("cms").support_work == 128 + 16 < sketch("cms").support_size == 1024**2
    assert sketch("hcms").support_work == 1 < sketch("hcms").support_size == 2 * 1024**2
    assert make_oracle("olh", epsilon=1.0, domain_size=8).support_work == 8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"k": 0}, "k"),
        ({"k": 2**16 + 1}, "k"),
        ({"k": 2.0}, "k"),
        ({"k": True}, "k"),
        ({"m": 1}, "m"),
        ({"m": 2**17}, "m"),
        ({"m": "8"}, "m"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 21.0}, "epsilon"),
        ({"labels": ["a", "a"], "domain_size": 2}, "labels"),
    ],
    ids=repr,
)
def test_parameters_are_validated(name: str, params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParameterError, match=rf"^{field}: "):
        sketch(name, **params)


def test_the_hadamard_sketch_needs_a_power_of_two_width() -> None:
    with pytest.raises(ParameterError, match=r"^m: must be a power of two"):
        sketch("hcms", m=1000)
    assert sketch("cms", m=1000).m == 1000


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 20.0])
def test_the_guarantee_is_the_request(name: str, epsilon: float) -> None:
    # Computed from the probabilities the exact samplers draw with: the request, up to the
    # rounding of the doubles (1 - p loses ~12 digits of p near eps = 20).
    assert sketch(name, epsilon=epsilon).epsilon == pytest.approx(epsilon, rel=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_hash_j_is_the_local_hash_with_seed_j(name: str) -> None:
    labels = ["apple", "", "日本語", "naïve café"]
    oracle = sketch(name, domain_size=4, labels=labels, k=300, m=64)
    rows = np.array([0, 1, 17, 299])
    for v, label in enumerate(labels):
        key = xxhash.xxh64_intdigest(label.encode("utf-8"), seed=0).to_bytes(8, "little")
        want = [xxhash.xxh32_intdigest(key, seed=int(j)) % 64 for j in rows]
        assert oracle.buckets(np.full(rows.size, v), rows).tolist() == want


@pytest.mark.parametrize("name", NAMES)
def test_the_support_needs_no_candidates(name: str) -> None:
    # Reports of a campaign labelled A; the sketch estimates A's items by key exactly as the
    # oracle does, and any other string (open domain) from the same support.
    labels = ["red", "green", "blue", "teal"]
    oracle = sketch(name, domain_size=4, labels=labels)
    values = np.repeat(np.arange(4), [3000, 2000, 1000, 0])
    rng = np.random.default_rng(1)
    support = oracle.support(oracle.perturb_batch(values, rng))
    n = values.size
    by_key = oracle.estimate_keys(support, n, item_keys(labels))
    assert np.allclose(by_key, oracle.estimate(support, n))
    other = sketch(name, domain_size=3, labels=["blue", "purple", "red"])
    assert np.allclose(other.estimate(support, n)[[0, 2]], by_key[[2, 0]])
    # "purple" was never reported: its estimate is noise around 0.
    stderr = math.sqrt(other.variance(n)[1])
    assert abs(other.estimate(support, n)[1]) < 4.5 * stderr


@pytest.mark.parametrize("name", NAMES)
def test_the_family_collides_like_a_random_family(name: str) -> None:
    # The estimate is unbiased for a random family (the paper's model); the real, fixed
    # family must look like one: over pairs of items, the number of functions under which
    # a pair collides is Binomial(k, 1/m) in mean and variance.
    k, m, pairs = 1024, 64, 400
    labels = [f"item-{i}" for i in range(2 * pairs)]
    oracle = sketch(name, domain_size=len(labels), labels=labels, k=k, m=m)
    collisions = np.array([k * oracle.collision_rate(2 * i, 2 * i + 1) for i in range(pairs)])
    mean, variance = k / m, k / m * (1 - 1 / m)
    z_mean = (collisions.mean() - mean) / math.sqrt(variance / pairs)
    assert abs(z_mean) < 4, z_mean
    low, high = stats.chi2.ppf([1e-4, 1 - 1e-4], pairs - 1) / (pairs - 1)
    assert low < collisions.var(ddof=1) / variance < high


@pytest.mark.parametrize("name", NAMES)
def test_any_string_can_be_reported_and_estimated_later(name: str) -> None:
    # A campaign's labels are only defaults: a client reports a string outside them (from
    # the OS CSPRNG), and the aggregator estimates any candidate from the same support.
    oracle = sketch(name, domain_size=2, labels=["yes", "no"])
    report = oracle.perturb_string("maybe")
    batch = oracle.decode([report])
    assert oracle.support(batch).sum() >= 0
    words = ["maybe"] * 4000 + ["never"] * 1000
    keys = item_keys(words)
    support = oracle.support(oracle.perturb_keys(keys, np.random.default_rng(9)))
    candidates = item_keys(["maybe", "never", "yes"])
    estimate = oracle.estimate_keys(support, len(words), candidates)
    stderr = np.sqrt(oracle.variance(len(words), np.array([0.8, 0.2, 0.0])[:2]))
    stderr = np.append(stderr, math.sqrt(oracle.variance(len(words))[0]))
    assert np.all(np.abs(estimate - [4000, 1000, 0]) < 4.5 * stderr), estimate


def family_offset(oracle: SketchOracle, counts: NDArray[np.int64]) -> NDArray[np.float64]:
    """The fixed family's exact offset of each item's estimate:
    (m/(m-1)) sum_{w != v} n_w (rho(v, w) - 1/m), from the real collision rates."""
    d, m = counts.size, oracle.m
    rho = np.array([[oracle.collision_rate(v, w) for w in range(d)] for v in range(d)])
    np.fill_diagonal(rho, 1 / m)
    offset: NDArray[np.float64] = m / (m - 1) * (rho - 1 / m) @ counts
    return offset


@pytest.mark.parametrize("name", NAMES)
def test_the_fixed_family_offset_has_the_stated_mean_square(name: str) -> None:
    # Over many label sets (each a fresh draw of the pairs' collision rates), the exact
    # offsets average 0 with the stated mean square.
    counts = np.array([1_800, 150, 50])
    sets = 1_500
    offsets = np.array(
        [
            family_offset(
                sketch(name, domain_size=3, labels=[f"{s}:{i}" for i in range(3)], k=16, m=4),
                counts,
            )
            for s in range(sets)
        ]
    )
    # Mean square sum_{w != v} n_w^2 / (k (m - 1)): family_variance (the covariance of
    # reports of one w) plus the n_w / (k (m - 1)) of the reports' own collision term.
    oracle = sketch(name, domain_size=3, k=16, m=4)
    want = oracle.family_variance(counts) + (counts.sum() - counts) / (16 * 3)
    square = offsets**2
    z_mean = offsets.mean(axis=0) / (offsets.std(axis=0, ddof=1) / math.sqrt(sets))
    z_square = (square.mean(axis=0) - want) / (square.std(axis=0, ddof=1) / math.sqrt(sets))
    assert np.all(np.abs(z_mean) < 4) and np.all(np.abs(z_square) < 4), (z_mean, z_square)


@pytest.mark.parametrize("name", NAMES)
def test_for_one_family_the_estimate_is_off_by_exactly_that_offset(name: str) -> None:
    counts = np.array([1_800, 150, 50])
    oracle = sketch(name, domain_size=3, labels=["a", "b", "c"], k=8, m=4)
    offset = family_offset(oracle, counts)
    assert np.max(np.abs(offset)) > 100  # a visible offset at this tiny k
    reps = repeat_estimates(oracle, counts, 300, seed=17)
    errors = reps.estimates.mean(axis=0) - counts - offset
    stderr = reps.estimates.std(axis=0, ddof=1) / math.sqrt(reps.trials)
    assert np.all(np.abs(errors / stderr) < 4), errors / stderr
