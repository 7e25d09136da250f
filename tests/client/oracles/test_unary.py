"""Unary encoding's shared parts (client/oracles/unary.py): the bit-vector wire form, the
support count over packed bits, the report law, and what SUE and OUE share beyond the
contract (test_contract.py): strict decoding, test vectors, the exact audit."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.analysis.audit import exact_audit
from ldptel.client.errors import ReportError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.unary import (
    UnaryEncoding,
    bit_counts,
    decode_bit_vectors,
    encode_bit_vectors,
    pack_bits,
    unpack_bits,
)

VECTORS = Path(__file__).parents[2] / "vectors"
UNARY = ["sue", "oue"]
ALPHA = 1e-3


def unary(name: str, epsilon: float, domain_size: int) -> UnaryEncoding:
    oracle = make_oracle(name, epsilon=epsilon, domain_size=domain_size)
    assert isinstance(oracle, UnaryEncoding)
    return oracle


def random_bits(n: int, d: int, seed: int) -> NDArray[np.bool_]:
    return np.random.default_rng(seed).random((n, d)) < 0.4


# -- wire form -------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 7, 8, 9, 64, 1000])
def test_pack_unpack_and_encode_decode_round_trip(d: int) -> None:
    bits = random_bits(50, d, seed=d)
    packed = pack_bits(bits)
    assert packed.shape == (50, (d + 7) // 8)
    assert np.array_equal(unpack_bits(packed, d), bits)
    wire = json.loads(json.dumps([{"bits": text} for text in encode_bit_vectors(packed)]))
    assert np.array_equal(decode_bit_vectors(wire, d, "bits"), packed)


def test_item_0_is_the_high_bit_of_the_first_byte() -> None:
    bits = np.zeros((1, 10), dtype=bool)
    bits[0, [0, 9]] = True
    packed = pack_bits(bits)
    assert packed.tolist() == [[0x80, 0x40]]
    assert encode_bit_vectors(packed) == ["gEA="]


@pytest.mark.parametrize("name", UNARY)
def test_vectors_encode_and_decode(name: str) -> None:
    vectors = json.loads((VECTORS / f"{name}.json").read_text())
    assert vectors["oracle"] == name
    for case in vectors["reports"]:
        oracle = unary(name, 1.0, case["domain_size"])
        batch = {"bits": pack_bits(np.array([case["bits"]], dtype=bool))}
        assert oracle.encode(batch) == [case["report"]]
        decoded = oracle.decode([case["report"]])
        assert unpack_bits(decoded["bits"], case["domain_size"]).tolist() == [case["bits"]]
        expected = np.array(case["bits"])
        assert np.array_equal(oracle.support(decoded), expected)


@pytest.mark.parametrize("name", UNARY)
def test_vectors_parameters(name: str) -> None:
    for case in json.loads((VECTORS / f"{name}.json").read_text())["parameters"]:
        oracle = unary(name, case["epsilon"], 16)
        assert oracle.p == pytest.approx(case["p"], rel=1e-13)
        assert oracle.q == pytest.approx(case["q"], rel=1e-13)
        assert oracle.epsilon == pytest.approx(case["epsilon"], rel=1e-12)


def malformed_cases() -> list[Any]:
    return [
        pytest.param(name, case, id=f"{name}-d{case['domain_size']}-{case['case']}")
        for name in UNARY
        for case in json.loads((VECTORS / f"{name}.json").read_text())["malformed"]
    ]


@pytest.mark.parametrize(("name", "case"), malformed_cases())
def test_vectors_malformed_reports_are_rejected_naming_the_field(
    name: str, case: dict[str, Any]
) -> None:
    oracle = unary(name, 1.0, case["domain_size"])
    valid = {"bits": encode_bit_vectors(np.zeros((1, (case["domain_size"] + 7) // 8), np.uint8))[0]}
    with pytest.raises(ReportError) as caught:
        oracle.decode([valid, case["report"]])
    assert caught.value.field == f"reports[1].{case['field']}"
    assert caught.value.index == 1
    assert case["reason"] in caught.value.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"gEA=", "base64 string"),  # bytes are not JSON text
        ("gEA\u00e9", "not valid base64"),  # non-ASCII, right length
        ("gE=A", "not valid base64"),  # padding in the middle
        ("gEA", "base64 characters"),  # missing '=' padding
    ],
    ids=repr,
)
def test_decode_rejects_more_malformed_texts(text: object, reason: str) -> None:
    with pytest.raises(ReportError, match=reason) as caught:
        decode_bit_vectors([{"bits": text}], 10, "bits")
    assert caught.value.field == "reports[0].bits"


def test_decode_points_at_the_first_report_with_padding_bits_set() -> None:
    reports = [{"bits": "gEA="}, {"bits": "gEA="}, {"bits": "gEE="}, {"bits": "gEI="}]
    with pytest.raises(ReportError, match="padding") as caught:
        decode_bit_vectors(reports, 10, "bits")
    assert caught.value.index == 2


def test_decode_rejects_a_non_list() -> None:
    with pytest.raises(ReportError) as caught:
        decode_bit_vectors({"bits": "gEA="}, 10, "bits")
    assert caught.value.field == "reports"


# -- support ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "d"),
    [(0, 10), (1, 10), (900, 1024), (3000, 10), (3000, 1024), (1500, 40_000)],
)
def test_bit_counts_equal_the_column_sums_of_the_unpacked_bits(n: int, d: int) -> None:
    # Few rows take the unpacking path, many the per-byte-column histogram; d = 40 000 spans
    # more than one column block of the histogram.
    bits = random_bits(n, d, seed=n + d)
    counts = bit_counts(pack_bits(bits), d)
    assert counts.dtype == np.int64 and counts.shape == (d,)
    assert np.array_equal(counts, bits.sum(axis=0))


def test_bit_counts_of_sparse_rows() -> None:
    bits = np.zeros((5000, 1024), dtype=bool)
    bits[np.arange(5000), np.arange(5000) % 1024] = True
    assert np.array_equal(bit_counts(pack_bits(bits), 1024), bits.sum(axis=0))


# -- privacy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 12.0])
def test_exact_audit_measures_exactly_the_claimed_epsilon(name: str, epsilon: float) -> None:
    oracle = unary(name, epsilon, 6)
    assert oracle.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert exact_audit(oracle).epsilon == pytest.approx(epsilon, rel=1e-9)


@pytest.mark.parametrize("name", UNARY)
def test_audit_events_of_a_report_are_its_two_bits(name: str) -> None:
    oracle = unary(name, 1.0, 12)
    bits = np.zeros((4, 12), dtype=bool)
    bits[1, 9] = bits[2, 3] = bits[3, [3, 9]] = True
    events = oracle.audit_events({"bits": pack_bits(bits)}, 9, 3)
    assert events.tolist() == [0, 1, 2, 3]  # 2 * bit[3] + bit[9]
    assert oracle.audit_probabilities(3, 9) == pytest.approx(
        [
            (1 - oracle.p) * (1 - oracle.q),
            (1 - oracle.p) * oracle.q,
            oracle.p * (1 - oracle.q),
            oracle.p * oracle.q,
        ]
    )


# -- the report law --------------------------------------------------------------------------
def binomial_p_value(counts: NDArray[np.int64], trials: int, prob: float) -> float:
    """Chi-square of counts against Binomial(trials, prob), classes with >= 20 expected."""
    expected = stats.binom.pmf(np.arange(trials + 1), trials, prob) * counts.size
    observed = np.bincount(counts, minlength=trials + 1)
    keep = expected >= 20
    rest = [observed[~keep].sum(), expected[~keep].sum()]
    obs, exp = np.append(observed[keep], rest[0]), np.append(expected[keep], rest[1])
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("name", UNARY)
def test_reports_have_the_unary_law(name: str) -> None:
    # The other bits' count is Binomial(d - 1, q), every other position is equally likely,
    # and the true bit is 1 with probability p.
    d, n = 512, 60_000
    oracle = unary(name, 6.0, d)
    rng = np.random.default_rng(9)
    values = np.full(n, 7, dtype=np.int64)
    bits = unpack_bits(oracle.perturb_batch(values, rng)["bits"], d).astype(np.int64)
    true_bits = bits[:, 7]
    others = np.delete(bits, 7, axis=1)
    p, q = oracle.p_star, oracle.q_star
    assert abs(true_bits.mean() - p) < 4 * math.sqrt(p * (1 - p) / n)
    assert binomial_p_value(others.sum(axis=1), d - 1, q) > ALPHA
    per_position = others.sum(axis=0)
    assert stats.chisquare(per_position).pvalue > ALPHA
