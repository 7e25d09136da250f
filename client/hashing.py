"""The protocol's hashes (docs/protocol.md): item keys and the local-hashing family.

item_key(value) = xxh64(utf8(value), seed=0); the local hash of an item under a report's
32-bit seed is xxh32(le64(item_key), seed). `lh_hash` evaluates xxh32 on those 8-byte inputs
for whole numpy arrays with broadcasting, bit-identical to the `xxhash` package.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash
from numpy.typing import NDArray

# xxh32's constants (Collet, xxHash specification, section "XXH32 algorithm").
_P1 = np.uint32(0x9E3779B1)  # unused by the 8-byte path beyond documentation
_P2 = np.uint32(0x85EBCA77)
_P3 = np.uint32(0xC2B2AE3D)
_P4 = np.uint32(0x27D4EB2F)
_P5 = np.uint32(0x165667B1)
_EIGHT = np.uint32(8)


def item_key(value: str) -> int:
    """The 64-bit key of a value: xxh64 of its UTF-8 bytes with seed 0."""
    return xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


def item_keys(values: Iterable[str]) -> NDArray[np.uint64]:
    """Item keys of many values, as a uint64 array."""
    return np.fromiter((item_key(v) for v in values), dtype=np.uint64)


def lh_hash_scalar(key: int, seed: int) -> int:
    """Reference xxh32(le64(key), seed) through the xxhash package (one pair)."""
    return xxhash.xxh32_intdigest(int(key).to_bytes(8, "little"), seed=int(seed))


def _rotl(x: NDArray[np.uint32], r: int) -> NDArray[np.uint32]:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def key_lanes(keys: NDArray[np.uint64]) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
    """The two 32-bit little-endian lanes of each key, pre-multiplied by PRIME32_3.

    Precomputing these once per candidate list removes two multiplies per (report, item) pair.
    """
    keys = np.asarray(keys, dtype=np.uint64)
    low = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (keys >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):  # wrapping is the point (numpy warns for 0-d inputs)
        return low * _P3, high * _P3


def lh_hash(keys: NDArray[np.uint64], seeds: NDArray[np.uint32]) -> NDArray[np.uint32]:
    """xxh32(le64(key), seed) for broadcast arrays of keys and seeds."""
    lane0, lane1 = key_lanes(keys)
    return lh_hash_lanes(lane0, lane1, np.asarray(seeds, dtype=np.uint32))


def lh_hash_lanes(
    lane0: NDArray[np.uint32], lane1: NDArray[np.uint32], seeds: NDArray[np.uint32]
) -> NDArray[np.uint32]:
    """xxh32 of 8-byte inputs from pre-multiplied lanes (see `key_lanes`); broadcasts."""
    with np.errstate(over="ignore"):
        # Short-input path of XXH32: acc = seed + P5 + len, then one round per 4-byte lane.
        acc = seeds + (_P5 + _EIGHT)
        acc = acc + lane0
        acc = _rotl(acc, 17) * _P4
        acc += lane1
        acc = _rotl(acc, 17) * _P4
        # Avalanche.
        acc ^= acc >> np.uint32(15)
        acc *= _P2
        acc ^= acc >> np.uint32(13)
        acc *= _P3
        acc ^= acc >> np.uint32(16)
    return acc
