"""JSON documents equal but for the last bits of their floats: OpenBLAS picks its kernels by
CPU (OPENBLAS_CORETYPE), and a matrix product's last bit differs between them (this AMD EPYC
against the SkylakeX kernel the goldens were written with), so a document of estimates
written on one machine is read on another within 1e-12 relative, not byte for byte."""

from __future__ import annotations

import json
import math
from typing import Any

#: A float sum of n terms is off by at most about n 2^-53 of its terms' magnitude whichever
#: order a kernel adds them in: 1e-12 covers sums of up to ~9,000 terms, and a real change
#: to a document moves far more digits.
REL = ABS = 1e-12


def close(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Where two parsed JSON values differ beyond REL/ABS on floats and at all elsewhere."""
    if isinstance(expected, float) and isinstance(actual, float):
        same = math.isclose(expected, actual, rel_tol=REL, abs_tol=ABS)
        return [] if same else [f"{path}: {expected!r} != {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.keys() != actual.keys():
            return [f"{path}: keys {sorted(expected)} != {sorted(actual)}"]
        return [d for key in expected for d in close(expected[key], actual[key], f"{path}.{key}")]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in close(e, a, f"{path}[{i}]")
        ]
    return (
        []
        if type(expected) is type(actual) and expected == actual
        else [f"{path}: {expected!r} != {actual!r}"]
    )


def assert_json_close(expected: str, actual: str) -> None:
    differences = close(json.loads(expected), json.loads(actual))
    assert not differences, differences[:5]
