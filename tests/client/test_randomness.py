"""SecureRandom: full-range 64-bit words (what the samplers draw) and dtype handling; where
the client's bytes come from (the kernel's CSPRNG, OpenSSL's DRBG for large reads), and that
a forked child never repeats its parent's stream."""

from __future__ import annotations

import os
import ssl

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from ldptel.client import randomness
from ldptel.client.randomness import BULK_BYTES, SecureRandom, secure_bytes

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


def test_small_reads_come_from_the_kernel_and_large_ones_from_openssl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, int]] = []
    kernel, openssl = os.urandom, ssl.RAND_bytes
    monkeypatch.setattr(os, "urandom", lambda n: calls.append(("kernel", n)) or kernel(n))
    monkeypatch.setattr(randomness, "_bulk", lambda n: calls.append(("openssl", n)) or openssl(n))
    assert len(secure_bytes(BULK_BYTES - 1)) == BULK_BYTES - 1
    assert len(secure_bytes(BULK_BYTES)) == BULK_BYTES
    SecureRandom().integers(0, 1 << 64, 8192, dtype=np.uint64)  # an OUE report's read
    assert calls == [("kernel", BULK_BYTES - 1), ("openssl", BULK_BYTES), ("openssl", 65536)]


def test_large_reads_are_uniform_in_every_byte() -> None:
    words = np.frombuffer(secure_bytes(1 << 20), dtype="<u8")
    assert min(byte_p_values(words)) > ALPHA / 8


def test_a_forked_child_does_not_repeat_its_parents_stream() -> None:
    # OpenSSL's DRBG state is copied by fork(); it must reseed in the child (OpenSSL 3
    # compares the process id), or parent and children would send the same randomness.
    secure_bytes(BULK_BYTES)  # the DRBG instantiated before the fork
    children = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its next large read, to the parent
            try:
                os.write(write, secure_bytes(BULK_BYTES)[:32])
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as pipe:
            children.append(pipe.read())
    mine = secure_bytes(BULK_BYTES)[:32]
    assert all(len(child) == 32 for child in children)
    assert len({mine, *children}) == 3
