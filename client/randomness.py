"""Randomness for the oracles: the OS CSPRNG on the client, a seeded generator in simulation.

Oracles use only `random(size)` and `integers(low, high, size)`, the two methods that
numpy's `Generator` and our `SecureRandom` share, and the exact samplers built on them here.
"""

from __future__ import annotations

import os
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

_TWO_POW_MINUS_53 = 2.0**-53


class Rng(Protocol):
    """What an oracle needs from a random source (numpy's `Generator` satisfies it)."""

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]: ...

    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> NDArray[np.int64]: ...


class SecureRandom:
    """Uniform draws from the operating system's CSPRNG (`os.urandom`)."""

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        count = int(np.prod(size))
        words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
        # 53 random bits -> a uniform double in [0, 1) on the 2^-53 grid (no rounding bias).
        return ((words >> np.uint64(11)).astype(np.float64) * _TWO_POW_MINUS_53).reshape(size)

    def integers(self, low: int, high: int, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        span = high - low
        if span <= 0:
            raise ValueError("integers: high must exceed low")
        count = int(np.prod(size))
        out = np.empty(count, dtype=np.uint64)
        # Rejection sampling keeps every integer exactly equally likely.
        limit = np.uint64((2**64 // span) * span - 1) if span & (span - 1) else None
        filled = 0
        while filled < count:
            need = count - filled
            words = np.frombuffer(os.urandom(8 * need), dtype=np.uint64)
            if limit is not None:
                words = words[words <= limit]
            take = words[:need]
            out[filled : filled + take.size] = take
            filled += take.size
        values: NDArray[np.int64] = (out % np.uint64(span)).astype(np.int64) + low
        return values.reshape(size)


def default_rng() -> Rng:
    """The client's default random source: the OS CSPRNG."""
    return SecureRandom()


def bernoulli(rng: Rng, p: float, size: int | tuple[int, ...]) -> NDArray[np.bool_]:
    """Independent coins that are True with probability p."""
    return rng.random(size) < p


def geometric(rng: Rng, p: float, size: int | tuple[int, ...]) -> NDArray[np.int64]:
    """Failures before the first success, P(k) = (1-p)^k p, by inversion of a uniform."""
    u = rng.random(size)
    # 1 - u lies in (0, 1], so the log is finite; floor(log(1-u)/log(1-p)) is Geometric(p).
    draws: NDArray[np.int64] = np.floor(np.log1p(-u) / np.log1p(-p)).astype(np.int64)
    return draws


def discrete_laplace(rng: Rng, a: float, size: int | tuple[int, ...]) -> NDArray[np.int64]:
    """Integer noise with P(k) proportional to a^|k| (0 < a < 1).

    The difference of two iid Geometric(1-a) variables has exactly this law, and integer
    noise has none of the floating-point holes of a sampled Laplace (Mironov, CCS 2012).
    """
    return geometric(rng, 1.0 - a, size) - geometric(rng, 1.0 - a, size)
