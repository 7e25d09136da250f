"""SecureRandom: full-range 64-bit words (what the samplers draw) and dtype handling."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.client.randomness import SecureRandom

#: OS randomness is not seeded: a very small per-test false-alarm rate.
ALPHA = 1e-6


def byte_p_values(words: NDArray[np.uint64]) -> list[float]:
    """Chi-square p-value of the byte histogram at each of the 8 byte positions of a word."""
    lanes = np.ascontiguousarray(words, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return [
        float(stats.chisquare(np.bincount(lanes[:, k], minlength=256)).pvalue) for k in range(8)
    ]


def test_full_range_words_are_uniform_in_every_byte() -> None:
    words = SecureRandom().integers(0, 1 << 64, (1 << 16, 2), dtype=np.uint64)
    assert words.dtype == np.uint64 and words.shape == (1 << 16, 2)
    assert min(byte_p_values(words)) > ALPHA / 8


def test_the_byte_check_rejects_words_with_a_zero_top_byte() -> None:
    words = np.random.default_rng(1).integers(0, 2**56, 1 << 17).astype(np.uint64)
    assert min(byte_p_values(words)) < ALPHA / 8


def test_a_numpy_generator_draws_the_same_kind_of_words() -> None:
    words = np.random.default_rng(1).integers(0, 1 << 64, 8, dtype=np.uint64)
    assert words.dtype == np.uint64 and words.shape == (8,)


def test_other_ranges_keep_their_law_and_take_the_dtype() -> None:
    values = SecureRandom().integers(3, 10, 6000, dtype=np.uint64)
    assert values.dtype == np.uint64 and values.min() >= 3 and values.max() <= 9
    counts = np.bincount(values.astype(np.int64) - 3, minlength=7)
    assert float(stats.chisquare(counts).pvalue) > ALPHA
    assert SecureRandom().integers(0, 5, (2, 3)).dtype == np.int64
    with pytest.raises(ValueError, match="high"):
        SecureRandom().integers(5, 5, 1)
