"""The sources of randomness: the OS CSPRNG on the client, a seeded generator in simulation.

A source offers `random(size)` and `integers(low, high, size[, dtype])`, the two methods that
numpy's `Generator` and our `SecureRandom` share. The oracles draw through the exact samplers
of samplers.py, which use only uniform integers from it (full-range 64-bit words, and integers
below a bound).

`secure_bytes` is where the client's random bytes come from: the kernel's CSPRNG
(`os.urandom`, getrandom(2)) for reads under BULK_BYTES, OpenSSL's DRBG (`ssl.RAND_bytes`) for
larger ones (a d-bit report of OUE reads about d bytes). Both are cryptographically secure
generators: OpenSSL 3's public DRBG is NIST SP 800-90A CTR_DRBG (AES-256), seeded and
reseeded from the kernel's, and reseeded in a forked child (it compares the process id,
so parent and child never share a stream: tests/client/test_randomness.py forks). On this
machine the kernel's costs ~3 ns a byte and OpenSSL's ~0.2 (66,624 bytes: 222 against 13 us
CPU); a call to OpenSSL costs ~1 us more, so small reads stay with the kernel
(benchmarks/README.md, "report() on the device").
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Protocol, overload

import numpy as np
from numpy.typing import NDArray

_TWO_POW_MINUS_53 = 2.0**-53
#: Reads of at least this many bytes come from OpenSSL's DRBG (measured crossover: 128 bytes
#: 1.2 us from the kernel, 1.5 from OpenSSL; 256 bytes 1.7 and 1.0).
BULK_BYTES = 256
_bulk: Callable[[int], bytes] | None = None


def secure_bytes(size: int) -> bytes:
    """`size` bytes from a CSPRNG: the kernel's below BULK_BYTES, else OpenSSL's DRBG (the
    kernel's if Python has no ssl module)."""
    if size < BULK_BYTES:
        return os.urandom(size)
    return (_bulk or _bulk_source())(size)


def _bulk_source() -> Callable[[int], bytes]:
    """ssl.RAND_bytes, imported on the first large read (ssl costs ~30 ms to import)."""
    global _bulk
    try:
        import ssl

        _bulk = ssl.RAND_bytes
    except ImportError:  # a Python built without OpenSSL
        _bulk = os.urandom
    return _bulk


class Rng(Protocol):
    """What an oracle needs from a random source (numpy's `Generator` satisfies it)."""

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]: ...

    @overload
    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> NDArray[np.int64]: ...

    @overload
    def integers(
        self, low: int, high: int, size: int | tuple[int, ...], dtype: type[np.uint64]
    ) -> NDArray[np.uint64]: ...


class SecureRandom:
    """Uniform draws from a CSPRNG (`secure_bytes`: the kernel's, or OpenSSL's DRBG)."""

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        count = _count(size)
        words = np.frombuffer(secure_bytes(8 * count), dtype=np.uint64)
        # 53 random bits -> a uniform double in [0, 1) on the 2^-53 grid (no rounding bias).
        return ((words >> np.uint64(11)).astype(np.float64) * _TWO_POW_MINUS_53).reshape(size)

    @overload
    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> NDArray[np.int64]: ...

    @overload
    def integers(
        self, low: int, high: int, size: int | tuple[int, ...], dtype: type[np.uint64]
    ) -> NDArray[np.uint64]: ...

    def integers(
        self,
        low: int,
        high: int,
        size: int | tuple[int, ...],
        dtype: type[np.int64] | type[np.uint64] = np.int64,
    ) -> NDArray[np.int64] | NDArray[np.uint64]:
        span = high - low
        if span <= 0:
            raise ValueError("integers: high must exceed low")
        count = _count(size)
        if dtype is np.uint64 and (low, high) == (0, 1 << 64):
            # The whole 64-bit range: the OS's random bytes are the draws as they come.
            words = np.frombuffer(secure_bytes(8 * count), dtype="<u8")
            return words.astype(np.uint64).reshape(size)
        out = np.empty(count, dtype=np.uint64)
        # Rejection sampling keeps every integer exactly equally likely.
        limit = np.uint64((2**64 // span) * span - 1) if span & (span - 1) else None
        filled = 0
        while filled < count:
            need = count - filled
            words = np.frombuffer(secure_bytes(8 * need), dtype=np.uint64)
            if limit is not None:
                words = words[words <= limit]
            take = words[:need]
            out[filled : filled + take.size] = take
            filled += take.size
        values: NDArray[np.int64] = (out % np.uint64(span)).astype(np.int64) + low
        if dtype is np.uint64:
            return values.astype(np.uint64).reshape(size)
        return values.reshape(size)


def _count(size: int | tuple[int, ...]) -> int:
    # math.prod, not np.prod: a single report's draws are a few values, where numpy's
    # per-call overhead (~5 us) would dominate.
    return int(size) if isinstance(size, (int, np.integer)) else math.prod(size)


def default_rng() -> Rng:
    """The client's default random source: a CSPRNG (`secure_bytes`)."""
    return SecureRandom()
