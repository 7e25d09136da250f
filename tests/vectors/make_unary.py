"""Regenerate sue.json and oue.json (run: .venv/bin/python THIS_FILE).

The encoded reports are packed bit by bit in plain Python (item i is bit 7 - i % 8 of byte
i // 8) and the probabilities come from the paper's formulas, so the vectors check our numpy
code rather than repeat it. Perturbation is random, so vectors cover the wire form and the
parameters; the statistical tests cover the randomization.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0]


def packed(bits: Sequence[int]) -> str:
    """base64 of the bits packed 8 per byte, item 0 in the high bit of byte 0."""
    data = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        data[i // 8] |= bit << (7 - i % 8)
    return base64.b64encode(bytes(data)).decode("ascii")


def sue(epsilon: float) -> tuple[float, float]:
    # Wang et al. 2017, eq. (9).
    half = math.exp(epsilon / 2)
    return half / (half + 1), 1 / (half + 1)


def oue(epsilon: float) -> tuple[float, float]:
    # Wang et al. 2017, eq. (11).
    return 0.5, 1 / (math.exp(epsilon) + 1)


def one_hot(d: int, v: int) -> list[int]:
    return [int(i == v) for i in range(d)]


def bit_cases(sizes: list[int]) -> list[dict[str, Any]]:
    """Edge patterns for each domain size: empty, full, single bits at the edges, mixed."""
    patterns: list[list[int]] = []
    for d in sizes:
        patterns += [
            [0] * d,
            [1] * d,
            one_hot(d, 0),
            one_hot(d, d - 1),
            [int((i * 7 + 3) % 5 == 0) for i in range(d)],
        ]
    return [
        {"domain_size": len(bits), "bits": list(bits), "report": {"bits": packed(bits)}}
        for bits in dict.fromkeys(tuple(pattern) for pattern in patterns)
    ]


def malformed(d: int) -> list[dict[str, Any]]:
    """Reports of domain size d that a collector must reject: the field at fault and a
    phrase of the reason."""
    width = (d + 7) // 8
    good = packed([1] + [0] * (d - 1))
    spare = 8 * width - d
    assert spare >= 2, "pick d with at least two padding bits"
    padded = bytearray(base64.b64decode(good))
    padded[-1] |= 1  # the last padding bit
    short = base64.b64encode(bytes(max(width - 3, 0))).decode("ascii")
    long = base64.b64encode(bytes(width + 3)).decode("ascii")
    # Same length as a valid text, but it decodes to the wrong number of bytes.
    same_length_short = base64.b64encode(bytes(width - 1 if width % 3 != 1 else width + 1))
    cases: list[tuple[str, Any, str, str]] = [
        ("not an object", good, "report", "must be an object"),
        ("missing field", {}, "bits", "is required"),
        ("number", {"bits": 5}, "bits", "base64 string"),
        ("null", {"bits": None}, "bits", "base64 string"),
        ("list of bits", {"bits": one_hot(d, 0)}, "bits", "base64 string"),
        ("text too short", {"bits": short}, "bits", "base64 characters"),
        ("text too long", {"bits": long}, "bits", "base64 characters"),
        ("wrong byte count, same length", {"bits": same_length_short.decode()}, "bits", "bytes"),
        ("not base64", {"bits": "@" + good[1:]}, "bits", "not valid base64"),
        ("whitespace", {"bits": " " + good[1:]}, "bits", "not valid base64"),
        ("padding bit set", {"bits": base64.b64encode(bytes(padded)).decode()}, "bits", "padding"),
    ]
    if width % 3:  # the last base64 character has unused bits to set
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        last = len(good) - 1 - good.count("=")
        bumped = good[:last] + alphabet[alphabet.index(good[last]) + 1] + good[last + 1 :]
        cases.append(("unused base64 bits set", {"bits": bumped}, "bits", "not canonical"))
    return [
        {"case": name, "domain_size": d, "report": report, "field": field, "reason": reason}
        for name, report, field, reason in cases
    ]


def vectors(name: str, formula: Any, description: str) -> dict[str, Any]:
    return {
        "oracle": name,
        "description": description,
        "parameters": [
            dict(zip(("epsilon", "p", "q"), (eps, *formula(eps)), strict=True)) for eps in EPSILONS
        ],
        "reports": bit_cases([2, 8, 10, 17, 64]),
        "malformed": malformed(10) + malformed(17),
    }


def main() -> None:
    common = (
        "report = {bits: base64(packbits(b))}, b[v] = 1 with probability p for the true item"
        " v, every other bit 1 with probability q; item i is bit 7 - i % 8 of byte i // 8,"
        " padding bits 0; supports = the items whose bit is set"
    )
    for name, formula, law in (
        ("sue", sue, "p = e^(eps/2) / (e^(eps/2) + 1), q = 1 - p"),
        ("oue", oue, "p = 1/2, q = 1 / (e^eps + 1)"),
    ):
        path = HERE / f"{name}.json"
        text = json.dumps(vectors(name, formula, f"{common}; {law}"), indent=1)
        # Bit lists on one line each: [0, 1, ...] rather than one number per line.
        text = re.sub(r"\[[\d,\s]+\]", lambda m: json.dumps(json.loads(m.group())), text)
        path.write_text(text + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
