"""Checks of one BLH or OLH test-vector case (tests/vectors/blh.json, olh.json), shared by
test_blh.py and test_olh.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from ldptel.client.hashing import item_key, lh_hash, lh_hash_scalar
from ldptel.client.oracles.local_hashing import LocalHashing


def check_case(oracle: LocalHashing, case: dict[str, Any]) -> None:
    """Every vector of a case: item key, hash, bucket, wire form and support."""
    assert oracle.labels == case["domain"] and oracle.g == case["g"]
    rows = case["reports"]
    for row in rows:
        key = int(row["item_key"])
        assert item_key(row["value"]) == key
        assert oracle.labels[row["index"]] == row["value"]
        assert lh_hash_scalar(key, row["seed"]) == row["hash"]
        keys, seeds = np.array([key], dtype=np.uint64), np.array([row["seed"]], dtype=np.uint32)
        assert lh_hash(keys, seeds).tolist() == [row["hash"]]
        assert oracle.buckets(np.array([row["index"]]), seeds).tolist() == [row["bucket"]]
        batch = oracle.decode([row["report"]])
        assert oracle.encode(batch) == [row["report"]]
        assert np.flatnonzero(oracle.support(batch)).tolist() == row["supports"]
    batch = oracle.decode([row["report"] for row in rows])
    expected = np.bincount(
        [w for row in rows for w in row["supports"]], minlength=oracle.domain_size
    )
    assert np.array_equal(oracle.support(batch), expected)
