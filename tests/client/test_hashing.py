"""The protocol's hashes: item keys and the vectorized local hash, bit for bit against the
xxhash package (random inputs) and against tests/vectors/hashing.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from ldptel.client.hashing import (
    item_key,
    item_keys,
    key_lanes,
    lh_hash,
    lh_hash_lanes,
    lh_hash_scalar,
)

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "hashing.json").read_text("utf-8"))
U32 = st.integers(min_value=0, max_value=2**32 - 1)
U64 = st.integers(min_value=0, max_value=2**64 - 1)


def reference(key: int, seed: int) -> int:
    return xxhash.xxh32_intdigest(key.to_bytes(8, "little"), seed=seed)


@given(st.text())
def test_item_key_is_xxh64_of_the_utf8_bytes(value: str) -> None:
    assert item_key(value) == xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


@given(st.lists(U64, min_size=1, max_size=20), st.lists(U32, min_size=1, max_size=20))
def test_lh_hash_equals_xxh32_for_every_key_and_seed(keys: list[int], seeds: list[int]) -> None:
    hashes = lh_hash(
        np.array(keys, dtype=np.uint64)[None, :], np.array(seeds, dtype=np.uint32)[:, None]
    )
    assert hashes.dtype == np.uint32 and hashes.shape == (len(seeds), len(keys))
    assert hashes.tolist() == [[reference(k, s) for k in keys] for s in seeds]


def test_lh_hash_on_many_random_pairs() -> None:
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    seeds = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    hashes = lh_hash(keys, seeds).tolist()
    assert hashes == [reference(k, s) for k, s in zip(keys.tolist(), seeds.tolist(), strict=True)]
    assert hashes == [
        lh_hash_scalar(k, s) for k, s in zip(keys.tolist(), seeds.tolist(), strict=True)
    ]


def test_precomputed_lanes_give_the_same_hash() -> None:
    keys = item_keys(["a", "b", "c"])
    seeds = np.array([[0], [1], [2**32 - 1]], dtype=np.uint32)
    lane0, lane1 = key_lanes(keys)
    assert np.array_equal(lh_hash_lanes(lane0, lane1, seeds), lh_hash(keys, seeds))


def test_item_keys_match_the_vectors() -> None:
    cases = VECTORS["item_keys"]
    for case in cases:
        assert case["value"].encode("utf-8").hex() == case["utf8_hex"]
        assert item_key(case["value"]) == int(case["item_key"])
    assert item_keys([c["value"] for c in cases]).tolist() == [int(c["item_key"]) for c in cases]


def test_local_hashes_match_the_vectors() -> None:
    cases = VECTORS["local_hash"]
    assert {c["seed"] for c in cases} >= {0, 1, 2**31, 2**32 - 1}
    keys = np.array([int(c["item_key"]) for c in cases], dtype=np.uint64)
    seeds = np.array([c["seed"] for c in cases], dtype=np.uint32)
    assert lh_hash(keys, seeds).tolist() == [c["hash"] for c in cases]
    for case in cases:
        key = int(case["item_key"])
        assert key == item_key(case["value"])
        assert bytes.fromhex(case["input_hex"]) == key.to_bytes(8, "little")
        assert lh_hash_scalar(key, case["seed"]) == case["hash"]
        for g, bucket in case["mod"].items():
            assert case["hash"] % int(g) == bucket


@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_lh_hash_broadcasts_like_numpy(shape: tuple[int, ...]) -> None:
    keys = np.full(shape, item_key("x"), dtype=np.uint64)
    hashes = lh_hash(keys, np.uint32(9))
    assert hashes.shape == shape
    assert np.all(hashes == reference(item_key("x"), 9))
