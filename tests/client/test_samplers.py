"""The exact samplers (client/samplers.py): each one's law, checked against a test that a
slightly wrong sampler fails. The grid law's TableSampler is checked cell by cell in
oracles/test_histogram.py, the oracles' report laws in their own tests."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.client import samplers
from ldptel.client.randomness import Rng, SecureRandom
from ldptel.client.samplers import (
    FLOYD_MAX_SIZE,
    MAX_START_BITS,
    base256_digits,
    sample_bernoulli,
    sample_bernoulli_words,
    sample_subsets,
    sample_uniform_below,
    sample_uniform_bits,
    uniform_bytes,
)

ALPHA = 1e-3
#: OS randomness is not seeded: a very small per-test false-alarm rate.
OS_ALPHA = 1e-6


def alpha(rng: Rng) -> float:
    return OS_ALPHA if isinstance(rng, SecureRandom) else ALPHA


# -- uniform bits ---------------------------------------------------------------------------


def byte_uniformity_p_values(data: NDArray[np.uint8]) -> list[float]:
    """Chi-square p-value of the byte histogram at each position mod 8 (each byte of a
    word)."""
    lanes = data[: data.size // 8 * 8].reshape(-1, 8)
    return [
        float(stats.chisquare(np.bincount(lanes[:, k], minlength=256)).pvalue) for k in range(8)
    ]


@pytest.mark.parametrize("rng", [np.random.default_rng(1), SecureRandom()], ids=["numpy", "os"])
def test_uniform_bytes_are_uniform_at_every_position(rng: Rng) -> None:
    data = uniform_bytes(rng, (1 << 21) + 3)
    assert data.dtype == np.uint8 and data.size == (1 << 21) + 3
    assert min(byte_uniformity_p_values(data)) > alpha(rng) / 8


def test_byte_uniformity_check_rejects_words_with_a_zero_top_byte() -> None:
    words = np.random.default_rng(1).integers(0, 2**56, 1 << 18).astype("<i8")
    assert min(byte_uniformity_p_values(words.view(np.uint8))) < ALPHA / 8


@pytest.mark.parametrize("rng", [np.random.default_rng(2), SecureRandom()], ids=["numpy", "os"])
@pytest.mark.parametrize("upper", [7, 1000, 2**32])
def test_uniform_integers_below_a_bound_are_uniform(rng: Rng, upper: int) -> None:
    values = sample_uniform_below(rng, upper, 70_000)
    assert values.dtype == np.int64 and values.min() >= 0 and values.max() < upper
    # 7 classes of equal probability: [0, upper) cut at multiples of upper / 7.
    classes = values * 7 // upper
    assert stats.chisquare(np.bincount(classes, minlength=7)).pvalue > alpha(rng)
    # The check sees 3% of the draws moved to the top class.
    moved = classes.copy()
    moved[: 3 * moved.size // 100] = 6
    assert stats.chisquare(np.bincount(moved, minlength=7)).pvalue < alpha(rng)


def test_uniform_bits_are_the_leading_bits_of_the_words_and_uniform() -> None:
    class Words:
        def integers(self, low: int, high: int, size: int, dtype: type) -> NDArray[np.uint64]:
            assert (low, high, dtype) == (0, 2**64, np.uint64)
            return np.array([2**64 - 1, 2**63][:size], dtype=np.uint64)

    # 70 bits of the 128-bit number (second word, first word): all of the second word, then
    # the top 6 bits of the first (111111).
    assert sample_uniform_bits(Words(), 70) == 2**63 << 6 | 0b111111  # type: ignore[arg-type]
    assert sample_uniform_bits(Words(), 0) == 0  # type: ignore[arg-type]
    draws = [sample_uniform_bits(SecureRandom(), 3) for _ in range(8000)]
    assert stats.chisquare(np.bincount(draws, minlength=8)).pvalue > OS_ALPHA


# -- Bernoulli --------------------------------------------------------------------------------


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
    bits = sample_bernoulli(np.random.default_rng(2), prob, 1 << 22)
    limit = stats.norm.isf(ALPHA / 4)
    assert max(abs(z) for z in rate_and_pair_z(bits, prob)) < limit


def test_rate_check_rejects_a_sampler_that_stops_at_the_first_digit() -> None:
    # 0.27 = 68/256 + about 0.0037 from the later digits: dropping them must be caught.
    bits = np.random.default_rng(2).integers(0, 256, 1 << 22) < 68
    rate_z, _ = rate_and_pair_z(bits, 0.2689414213699951)
    assert abs(rate_z) > stats.norm.isf(ALPHA / 4)


def test_pair_check_rejects_correlated_neighbours() -> None:
    rng = np.random.default_rng(3)
    bits = rng.random(1 << 22) < 0.018
    bits[1::2] |= bits[:-1:2] & (rng.random(1 << 21) < 0.2)  # a 1 sometimes drags the next
    _, pair_z = rate_and_pair_z(bits, float(bits.mean()))
    assert abs(pair_z) > stats.norm.isf(ALPHA / 4)


@pytest.mark.parametrize("prob", [0.0, 2.0**-1074, 2.0**-60, 1 / 3, 0.5, 1 - 2.0**-53])
def test_the_digits_of_a_probability_are_its_exact_value(prob: float) -> None:
    digits = base256_digits(prob)
    assert sum(Fraction(d, 256 ** (j + 1)) for j, d in enumerate(digits)) == Fraction(prob)
    assert all(0 <= d < 256 for d in digits) and (not digits or digits[-1] != 0)


class ConstantBytes:
    """A 'random' source whose every byte is `byte`."""

    def __init__(self, byte: int) -> None:
        self.word = int.from_bytes(bytes([byte] * 8), "little")

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        raise AssertionError("the samplers draw no floats")

    def integers(
        self, low: int, high: int, size: int | tuple[int, ...], dtype: type = np.int64
    ) -> NDArray[Any]:
        assert (low, high, dtype) == (0, 2**64, np.uint64)
        return np.full(size, self.word, dtype=np.uint64)


@pytest.mark.parametrize("prob", [2.0**-1074, 2.0**-60, 1e-20, 0.5, 1 - 2.0**-53])
def test_every_bit_pattern_stays_possible_however_small_or_large_prob_is(prob: float) -> None:
    # U = 0.00 00 ... is below any prob > 0, U = 0.FF FF ... above any prob < 1 (where a float
    # uniform or a gap sampler would never give a 1 for prob < 2^-53, nor a 0 just below 1).
    assert sample_bernoulli(ConstantBytes(0), prob, 1000).all()
    assert not sample_bernoulli(ConstantBytes(255), prob, 1000).any()
    assert not sample_bernoulli(ConstantBytes(0), 0.0, 1000).any()
    assert sample_bernoulli(ConstantBytes(255), 1.0, 1000).all()


@pytest.mark.parametrize(("a", "b"), [(0, 0), (1, 0), (1, 1), (5, 3), (9, 5), (255, 8)])
def test_bernoulli_words_have_the_rate_a_over_2_to_the_b(a: int, b: int) -> None:
    words = sample_bernoulli_words(np.random.default_rng(5), a, b, 1 << 15)
    bits = np.unpackbits(words.view(np.uint8)).astype(bool)
    prob = a / 2**b
    if prob in (0.0, 1.0):
        assert bits.all() == bool(prob) and bits.any() == bool(prob)
        return
    limit = stats.norm.isf(ALPHA / 4)
    assert max(abs(z) for z in rate_and_pair_z(bits, prob)) < limit
    # The check sees a rate off by 2^-(b+1).
    assert abs(rate_and_pair_z(bits, (2 * a - 1) / 2 ** (b + 1))[0]) > limit


# -- uniform subsets --------------------------------------------------------------------------


def subset_p_value(n: int, sizes: NDArray[np.int64], rng: Rng) -> float:
    """Chi-square of the sampled subsets against the uniform law on the subsets of each
    size (one class per subset and size), with their bits past n checked to be 0."""
    packed = sample_subsets(rng, n, sizes)
    bits = np.unpackbits(packed, axis=1)
    assert not bits[:, n:].any()
    assert np.array_equal(bits.sum(axis=1), sizes)
    codes = bits[:, :n].astype(np.int64) @ (1 << np.arange(n))
    observed, expected = [], []
    for size in np.unique(sizes):
        rows = codes[sizes == size]
        subsets = [sum(1 << i for i in c) for c in itertools.combinations(range(n), int(size))]
        observed += [np.count_nonzero(rows == code) for code in subsets]
        expected += [rows.size / len(subsets)] * len(subsets)
    return float(stats.chisquare(observed, expected).pvalue)


FLOYD, FIXED_UP = 10**9, -1  # FLOYD_MAX_SIZE that sends every draw to one sampler


@pytest.mark.parametrize(
    ("n", "sizes", "floyd_max", "start"),
    [
        (7, (3,), FLOYD, None),
        (7, (2, 3), FLOYD, None),  # two sizes (SS: k - [v in S])
        (5, (0, 5), FLOYD, None),  # the empty and the full subset
        (7, (3,), FIXED_UP, None),  # the start the sampler picks
        (7, (2, 3), FIXED_UP, None),
        (5, (1, 4), FIXED_UP, None),
        (7, (3,), FIXED_UP, (1, 1)),
        (7, (3, 4), FIXED_UP, (3, 2)),
        (5, (1,), FIXED_UP, (1, 2)),  # draws on [6, 8) land on bit 5 (never eligible)
        (8, (5,), FIXED_UP, (5, 3)),  # n = 8: bit 8 is in the second byte
        (6, (3,), FIXED_UP, (0, 0)),  # empty start: only additions
        (6, (3,), FIXED_UP, (1, 0)),  # full start: only removals
    ],
)
def test_every_subset_of_a_size_is_equally_likely(
    n: int,
    sizes: tuple[int, ...],
    floyd_max: int,
    start: tuple[int, int] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(samplers, "FLOYD_MAX_SIZE", floyd_max)
    if start is not None:
        monkeypatch.setattr(samplers, "_start_probability", lambda n, t: start)
    rows = np.resize(np.array(sizes, dtype=np.int64), 90_000)
    assert subset_p_value(n, rows, np.random.default_rng(n * 10 + sizes[0])) > 1e-4


def test_small_subsets_take_floyd_and_large_ones_the_fix_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken: list[str] = []
    for name in ("_floyd_subsets", "_fixed_up_subsets"):
        real = getattr(samplers, name)
        monkeypatch.setattr(
            samplers, name, lambda *args, real=real, name=name: taken.append(name) or real(*args)
        )
    rng = np.random.default_rng(1)
    sample_subsets(rng, 1023, np.array([FLOYD_MAX_SIZE, FLOYD_MAX_SIZE - 1]))
    sample_subsets(rng, 1023, np.array([FLOYD_MAX_SIZE + 1, FLOYD_MAX_SIZE]))
    assert taken == ["_floyd_subsets", "_fixed_up_subsets"]


@pytest.mark.parametrize("floyd_max", [FLOYD, FIXED_UP])
def test_subsets_from_os_randomness_are_uniform(
    floyd_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(samplers, "FLOYD_MAX_SIZE", floyd_max)
    rows = np.full(60_000, 3, dtype=np.int64)
    assert subset_p_value(7, rows, SecureRandom()) > OS_ALPHA


class EvenDraws:
    """A numpy generator whose second block of 64-bit words (the first fix-up round) has
    every 16-bit half-word even: that round never picks an odd item."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        raise AssertionError("the samplers draw no floats")

    def integers(
        self, low: int, high: int, size: int | tuple[int, ...], dtype: type = np.int64
    ) -> NDArray[Any]:
        words = self.rng.integers(low, high, size, dtype=dtype)
        self.calls += 1
        return words & np.uint64(0xFFFE_FFFE_FFFE_FFFE) if self.calls == 2 else words


def test_the_subset_check_catches_biased_fix_up_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(samplers, "FLOYD_MAX_SIZE", FIXED_UP)
    monkeypatch.setattr(samplers, "_start_probability", lambda n, t: (1, 1))
    rows = np.full(90_000, 3, dtype=np.int64)
    assert subset_p_value(7, rows, EvenDraws(7)) < 1e-4


@pytest.mark.parametrize(
    ("n", "target", "start"),
    [
        (1, 0.0, (0, 0)),
        (1, 1.0, (1, 0)),
        (15, 4 / 15, (1, 2)),  # SS d = 16, eps = 1: measured ~2x faster than an empty start
        (1023, 18 / 1023, (0, 0)),  # SS d = 1024, eps = 4: few flips beat 6 random planes
        (1023, 275 / 1023, (1, 2)),
        (65535, 17625 / 65535, (1, 2)),
    ],
)
def test_the_start_probability_is_the_cheapest_dyadic_near_the_target(
    n: int, target: float, start: tuple[int, int]
) -> None:
    assert samplers._start_probability(n, target) == start
    for t in np.linspace(0, 1, 101):
        a, b = samplers._start_probability(1000, float(t))
        assert 0 <= b <= MAX_START_BITS and 0 <= a <= 2**b and (a % 2 == 1 or b == 0)
        assert abs(a / 2**b - t) <= 0.5


# -- one draw from the OS CSPRNG (the SDK's per-report path) ----------------------------------


def test_one_bernoulli_draw_compares_bytes_with_the_digits(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.2689... = 0.(68)(220)... in base 256: a byte below the digit decides 1, above 0,
    # equal defers to the next byte; equal through the last digit means U >= prob: 0.
    digits = samplers.base256_digits(0.2689414213699951)
    cases = [([67], True), ([69], False), ([68, digits[1] - 1], True), ([68, digits[1] + 1], False)]
    for stream, expected in cases:
        feed = iter(stream)
        monkeypatch.setattr(samplers.os, "urandom", lambda n, feed=feed: bytes([next(feed)]))
        assert samplers.bernoulli_one(0.2689414213699951) is expected
    feed = iter([64])
    monkeypatch.setattr(samplers.os, "urandom", lambda n, feed=feed: bytes([next(feed)]))
    assert samplers.bernoulli_one(0.25) is False  # 0.25 = 0.(64): U = 0.25... >= 0.25
    assert samplers.bernoulli_one(1.0) is True and samplers.bernoulli_one(0.0) is False


def test_one_bernoulli_draw_has_the_exact_rate() -> None:
    # 2^20 draws: the later digits' 0.0033 (what stopping at the first digit loses) is
    # 7.5 standard deviations, so this catches the sampler the batch check above catches.
    prob = 0.2689414213699951
    bits = np.array([samplers.bernoulli_one(prob) for _ in range(1 << 20)])
    rate_z, pair_z = rate_and_pair_z(bits, prob)
    assert max(abs(rate_z), abs(pair_z)) < stats.norm.isf(OS_ALPHA / 4)


def test_one_integer_below_a_bound_is_uniform() -> None:
    draws = [samplers.uniform_below_one(7) for _ in range(70_000)]
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > OS_ALPHA


def test_one_integer_below_any_bound_is_uniform_and_in_range() -> None:
    # Powers of two (no rejection), just above one (half rejected), 2^32 (OLH's seeds).
    for upper, draws in ((1, 10), (8, 40_000), (9, 45_000), (1 << 32, 40_000)):
        values = np.array([samplers.uniform_below_one(upper) for _ in range(draws)])
        assert values.min() >= 0 and values.max() < upper
        if upper > 1:
            cells = min(upper, 16)  # the top 4 bits of 2^32
            counts = np.bincount(values * cells // upper, minlength=cells)
            assert stats.chisquare(counts).pvalue > OS_ALPHA, upper
    # The leading bits, rejected while >= upper: 9 takes 4 bits of one byte.
    feed = iter([0xF0, 0x90, 0x10])  # 15 and 9 rejected, then 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(samplers.os, "urandom", lambda n: bytes([next(feed)]))
        assert samplers.uniform_below_one(9) == 1


def test_one_reports_bit_vector_compares_bytes_with_the_digits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # bernoulli_bits_one: one read, the first digit (68 for 0.2689...) against the first
    # `size` bytes, each byte equal to it continued from the second digit with the spare
    # bytes after them, in turn.
    prob = 0.2689414213699951
    second = samplers.base256_digits(prob)[1]
    read = bytes([67, 68, 69, 68, 0, second - 1, second + 1])
    monkeypatch.setattr(samplers, "secure_bytes", lambda n: read.ljust(n, b"\xff"))
    bits = samplers.bernoulli_bits_one(prob, 5)
    assert bits.tolist() == [True, True, False, False, True]


def test_a_large_bit_vector_continues_its_equal_bytes_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Above BITS_ONE_MAX bits the second digits are compared at once (the spare bytes in
    # the order of the positions), the bytes equal to it again one at a time (the next
    # spare bytes), a spare byte never used twice.
    prob = 0.2689414213699951
    first, second, third = samplers.base256_digits(prob)[:3]
    size = samplers.BITS_ONE_MAX + 4
    draws = bytes([first, first, first, first - 1]) + bytes([255]) * (size - 4)
    spare = bytes([second - 1, second, second + 1, third + 1])
    monkeypatch.setattr(samplers, "secure_bytes", lambda n: (draws + spare).ljust(n, b"\0"))
    bits = samplers.bernoulli_bits_one(prob, size)
    assert bits[:5].tolist() == [True, False, False, True, False]
    assert not bits[5:].any()


@pytest.mark.parametrize("prob", [0.2689414213699951, 0.25, 0.0003])
def test_one_reports_bit_vector_has_the_exact_rate(prob: float) -> None:
    # 2^20 bits from the client's CSPRNG, 4096 a call (bytes.find's continuation; larger
    # vectors continue in numpy): a sampler stopping at the first digit is 7.5
    # standard deviations off at 0.2689... (test_rate_check_rejects_... above).
    size = samplers.BITS_ONE_MAX
    bits = np.concatenate([samplers.bernoulli_bits_one(prob, size) for _ in range(256)])
    assert bits.size == 1 << 20
    assert max(abs(z) for z in rate_and_pair_z(bits, prob)) < stats.norm.isf(OS_ALPHA / 4)
    assert not samplers.bernoulli_bits_one(0.0, 64).any()
    assert samplers.bernoulli_bits_one(1.0, 64).all()
    # Also 2^20 bits from vectors above BITS_ONE_MAX (the numpy continuation).
    large = np.concatenate([samplers.bernoulli_bits_one(prob, 1 << 18) for _ in range(4)])
    assert large.size == 1 << 20
    assert max(abs(z) for z in rate_and_pair_z(large, prob)) < stats.norm.isf(OS_ALPHA / 4)
