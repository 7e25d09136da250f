"""Unary encoding's shared parts (client/oracles/unary.py): the bit-vector wire form, the
support count over packed bits, the exact Bernoulli bit sampler, and what SUE and OUE share
beyond the contract (test_contract.py): strict decoding, test vectors, the exact audit."""

from __future__ import annotations

import json
import math
from fractions import Fraction
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
    ExactBinomial,
    UnaryEncoding,
    _sparse_start,
    base256_digits,
    bernoulli_bits,
    bit_counts,
    decode_bit_vectors,
    encode_bit_vectors,
    pack_bits,
    random_bytes,
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


# -- the sampler -----------------------------------------------------------------------------


def byte_uniformity_p_values(data: NDArray[np.uint8]) -> list[float]:
    """Chi-square p-value of the byte histogram at each position mod 8 (position 7 of a word
    is filled by a different path than positions 0-6)."""
    lanes = data[: data.size // 8 * 8].reshape(-1, 8)
    return [
        float(stats.chisquare(np.bincount(lanes[:, k], minlength=256)).pvalue) for k in range(8)
    ]


def test_random_bytes_are_uniform_at_every_position() -> None:
    data = random_bytes(np.random.default_rng(1), 1 << 21)
    assert data.dtype == np.uint8 and data.size == 1 << 21
    assert min(byte_uniformity_p_values(data)) > ALPHA / 8


def test_byte_uniformity_check_rejects_words_with_a_zero_top_byte() -> None:
    words = np.random.default_rng(1).integers(0, 2**56, 1 << 18).astype("<i8")
    assert min(byte_uniformity_p_values(words.view(np.uint8))) < ALPHA / 8


def rate_and_pair_z(bits: NDArray[np.bool_], prob: float) -> tuple[float, float]:
    """z of the rate of ones against prob, and of the rate of adjacent 11 pairs against
    prob^2 (a gap sampler off by one position breaks the second)."""
    n = bits.size
    rate_z = (bits.sum() - n * prob) / np.sqrt(n * prob * (1 - prob))
    pairs = bits[:-1:2] & bits[1::2]
    pp = prob * prob
    pair_z = (pairs.sum() - pairs.size * pp) / np.sqrt(pairs.size * pp * (1 - pp))
    return float(rate_z), float(pair_z)


# First base-256 digits 68 (then more), 64 (and no more: 0.25), 4, and 0 (then 19).
@pytest.mark.parametrize("prob", [0.2689414213699951, 0.25, 0.018, 0.0003])
def test_bernoulli_bits_have_the_exact_rate_and_are_independent(prob: float) -> None:
    bits = bernoulli_bits(np.random.default_rng(2), prob, 1 << 22)
    limit = stats.norm.isf(ALPHA / 4)
    assert max(abs(z) for z in rate_and_pair_z(bits, prob)) < limit


def test_rate_check_rejects_a_sampler_that_stops_at_the_first_digit() -> None:
    # 0.27 = 68/256 + about 0.0037 from the later digits: dropping them must be caught.
    bits = np.random.default_rng(2).integers(0, 256, 1 << 22) < 68
    rate_z, _ = rate_and_pair_z(bits, 0.2689414213699951)
    assert abs(rate_z) > stats.norm.isf(ALPHA / 4)


@pytest.mark.parametrize("prob", [0.0, 2.0**-1074, 2.0**-60, 1 / 3, 0.5, 1 - 2.0**-53])
def test_the_digits_of_a_probability_are_its_exact_value(prob: float) -> None:
    digits = base256_digits(prob)
    assert sum(Fraction(d, 256 ** (j + 1)) for j, d in enumerate(digits)) == Fraction(prob)
    assert all(0 <= d < 256 for d in digits) and (not digits or digits[-1] != 0)


class ConstantBytes:
    """A 'random' source whose every byte is `byte` (random_bytes draws 56-bit words)."""

    def __init__(self, byte: int) -> None:
        self.word = int.from_bytes(bytes([byte] * 7), "little")

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        raise AssertionError("bernoulli_bits must not use floats")

    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        return np.full(size, self.word, dtype=np.int64)


@pytest.mark.parametrize("prob", [2.0**-1074, 2.0**-60, 1e-20, 0.5, 1 - 2.0**-53])
def test_every_bit_pattern_stays_possible_however_small_or_large_prob_is(prob: float) -> None:
    # U = 0.00 00 ... is below any prob > 0, U = 0.FF FF ... above any prob < 1 (where a float
    # uniform or a gap sampler would never give a 1 for prob < 2^-53, nor a 0 just below 1).
    assert bernoulli_bits(ConstantBytes(0), prob, 1000).all()
    assert not bernoulli_bits(ConstantBytes(255), prob, 1000).any()
    assert not bernoulli_bits(ConstantBytes(0), 0.0, 1000).any()
    assert bernoulli_bits(ConstantBytes(255), 1.0, 1000).all()


def test_pair_check_rejects_correlated_neighbours() -> None:
    rng = np.random.default_rng(3)
    bits = rng.random(1 << 22) < 0.018
    bits[1::2] |= bits[:-1:2] & (rng.random(1 << 21) < 0.2)  # a 1 sometimes drags the next
    _, pair_z = rate_and_pair_z(bits, float(bits.mean()))
    assert abs(pair_z) > stats.norm.isf(ALPHA / 4)


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


# -- sparse bits: an exact Binomial count, then a uniform subset --------------------------------
def binomial_p_value(counts: NDArray[np.int64], trials: int, prob: float) -> float:
    """Chi-square of counts against Binomial(trials, prob), classes with >= 20 expected."""
    expected = stats.binom.pmf(np.arange(trials + 1), trials, prob) * counts.size
    observed = np.bincount(counts, minlength=trials + 1)
    keep = expected >= 20
    rest = [observed[~keep].sum(), expected[~keep].sum()]
    obs, exp = np.append(observed[keep], rest[0]), np.append(expected[keep], rest[1])
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize(("trials", "prob"), [(20, 0.3), (511, 1 / (math.exp(4) + 1))])
def test_exact_binomial_draws_follow_the_binomial_law(trials: int, prob: float) -> None:
    sampler = ExactBinomial(trials, prob)
    counts = sampler.draw(np.random.default_rng(8), 300_000)
    assert binomial_p_value(counts, trials, prob) > ALPHA
    # The check sees a count law 3% off.
    assert binomial_p_value(counts, trials, prob * 1.03) < ALPHA


def test_exact_binomial_table_is_the_exact_cumulative_weights() -> None:
    # Small enough to hold every weight: C(N, i) a^i (2^t - a)^(N - i), total 2^(tN).
    trials, prob = 3, 0.375  # a = 3, t = 3: 9 bits of u
    sampler = ExactBinomial(trials, prob)
    weights = [math.comb(3, i) * 3**i * 5 ** (3 - i) for i in range(4)]
    assert sampler.shift == 0 and sampler.tops.tolist() == np.cumsum(weights).tolist()
    assert sampler.tops[-1] == 2**9
    big = ExactBinomial(1023, 1 / (math.exp(4) + 1))
    assert big.tops[-1] == 2**62 and np.all(np.diff(big.tops) >= 0)


def test_a_count_on_a_boundarys_top_bits_is_decided_by_its_low_bits() -> None:
    sampler = ExactBinomial(100, 0.3)
    cumulative = list(sampler._cumulative())
    i = 30
    top, low = cumulative[i] >> sampler.shift, cumulative[i] % 2**sampler.shift

    class Scripted:
        def __init__(self, low_bits: int) -> None:
            self.answers = [np.array([top]), self.words(low_bits)]

        def words(self, value: int) -> NDArray[np.uint64]:
            count = -(-sampler.shift // 64)
            bits = value << (64 * count - sampler.shift)
            return np.array([(bits >> (64 * j)) & (2**64 - 1) for j in range(count)], np.uint64)

        def integers(self, low: int, high: int, size: int, dtype: Any = np.int64) -> Any:
            return self.answers.pop(0)

    # u = cumulative[i] - 1 is in count i; u = cumulative[i] is in count i + 1.
    assert sampler.draw(Scripted(low - 1), 1).tolist() == [i]  # type: ignore[arg-type]
    assert sampler.draw(Scripted(low), 1).tolist() == [i + 1]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", UNARY)
def test_sparse_bits_have_the_unary_law(name: str) -> None:
    # d = 512 at eps = 6 takes the sparse path: the other bits' count is Binomial(d - 1, q),
    # every other position is equally likely, and the true bit is 1 with probability p.
    d, n = 512, 60_000
    oracle = unary(name, 6.0, d)
    rng = np.random.default_rng(9)
    assert _sparse_start(rng, n, d, oracle.q_star) is not None
    values = np.full(n, 7, dtype=np.int64)
    bits = unpack_bits(oracle.perturb_batch(values, rng)["bits"], d).astype(np.int64)
    true_bits = bits[:, 7]
    others = np.delete(bits, 7, axis=1)
    p, q = oracle.p_star, oracle.q_star
    assert abs(true_bits.mean() - p) < 4 * math.sqrt(p * (1 - p) / n)
    assert binomial_p_value(others.sum(axis=1), d - 1, q) > ALPHA
    per_position = others.sum(axis=0)
    assert stats.chisquare(per_position).pvalue > ALPHA
