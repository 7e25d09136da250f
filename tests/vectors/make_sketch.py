"""Regenerate cms.json and hcms.json (run: .venv/bin/python THIS_FILE).

Hashes come from the `xxhash` package one value at a time, and the sketch and the estimates
are computed here in plain Python by the paper's server algorithms (Apple, "Learning with
Privacy at Scale", 2017: M[j] += k (c/2 v~ + 1/2) for CMS; M_H[j, l] += k c w~, then
M = M_H H for HCMS; c~(v) = m/(m-1) ((1/k) sum_j M[j, h_j(v)] - n/m)), so the vectors check
our vectorized code rather than repeat it. Only the reports are drawn by our oracle (seeded).
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from ldptel.client.oracles import make_oracle

HERE = Path(__file__).parent
LABELS = ["apple", "banana", "", "日本語", "🙂", "naïve café", "cherry", "date"]


def item_key(value: str) -> int:
    return xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


def sketch_hash(value: str, j: int, m: int) -> int:
    return xxhash.xxh32_intdigest(item_key(value).to_bytes(8, "little"), seed=j) % m


def hadamard(row: int, column: int) -> int:
    return -1 if bin(row & column).count("1") % 2 else 1


def entries(text: str, m: int) -> list[int]:
    """The +-1 entries of a CMS bit vector (MSB first)."""
    raw = base64.b64decode(text)
    return [1 if raw[i // 8] >> (7 - i % 8) & 1 else -1 for i in range(m)]


def estimates(sketch: list[list[float]], k: int, m: int, n: int) -> list[float]:
    return [
        m / (m - 1) * (sum(sketch[j][sketch_hash(v, j, m)] for j in range(k)) / k - n / m)
        for v in LABELS
    ]


def cms_case(epsilon: float, k: int, m: int, seed: int) -> dict[str, Any]:
    oracle: Any = make_oracle(
        "cms", epsilon=epsilon, domain_size=len(LABELS), labels=LABELS, k=k, m=m
    )
    values = np.repeat(np.arange(len(LABELS)), 2)
    reports = oracle.encode(oracle.perturb_batch(values, np.random.default_rng(seed)))
    shrink = math.exp(-epsilon / 2)
    p, q = 1 / (1 + shrink), shrink / (1 + shrink)
    sketch = [[0.0] * m for _ in range(k)]
    rows = []
    for v, report in zip(values.tolist(), reports, strict=True):
        signs = entries(report["bits"], m)
        for i in range(m):
            # The paper's k (c/2 v~ + 1/2) with c = 1/(p - q), written k (bit - q)/(p - q).
            sketch[report["j"]][i] += k * ((signs[i] + 1) / 2 - q) / (p - q)
        bucket = sketch_hash(LABELS[v], report["j"], m)
        rows.append({"value": LABELS[v], "index": v, "bucket": bucket, "report": report})
    return {
        "epsilon": epsilon,
        "k": k,
        "m": m,
        "p": p,
        "q": q,
        "domain": LABELS,
        "hashes": {v: [sketch_hash(v, j, m) for j in range(k)] for v in LABELS},
        "reports": rows,
        "sketch": sketch,
        "estimate": estimates(sketch, k, m, len(rows)),
    }


def hcms_case(epsilon: float, k: int, m: int, seed: int) -> dict[str, Any]:
    oracle: Any = make_oracle(
        "hcms", epsilon=epsilon, domain_size=len(LABELS), labels=LABELS, k=k, m=m
    )
    values = np.repeat(np.arange(len(LABELS)), 3)
    reports = oracle.encode(oracle.perturb_batch(values, np.random.default_rng(seed)))
    flip = math.exp(-epsilon) / (1 + math.exp(-epsilon))
    c = 1 / (1 - 2 * flip)
    transformed = [[0.0] * m for _ in range(k)]  # M_H
    rows = []
    for v, report in zip(values.tolist(), reports, strict=True):
        sign = 1 if report["bit"] else -1
        transformed[report["j"]][report["l"]] += k * c * sign
        bucket = sketch_hash(LABELS[v], report["j"], m)
        true_sign = hadamard(report["l"], bucket)
        rows.append(
            {
                "value": LABELS[v],
                "index": v,
                "bucket": bucket,
                "true_sign": true_sign,
                "flipped": sign != true_sign,
                "report": report,
            }
        )
    flips = sum(row["flipped"] for row in rows)
    assert 0 < flips < len(rows), "regenerate with another seed: want kept and flipped signs"
    sketch = [
        [sum(transformed[j][row] * hadamard(row, col) for row in range(m)) for col in range(m)]
        for j in range(k)
    ]
    return {
        "epsilon": epsilon,
        "k": k,
        "m": m,
        "flip": flip,
        "c": c,
        "domain": LABELS,
        "hashes": {v: [sketch_hash(v, j, m) for j in range(k)] for v in LABELS},
        "reports": rows,
        "sketch": sketch,
        "estimate": estimates(sketch, k, m, len(rows)),
    }


CMS_MALFORMED = [
    ({"j": 4, "bits": "AAA="}, "j", "must be in [0, 4)"),
    ({"j": -1, "bits": "AAA="}, "j", "must be in [0, 4)"),
    ({"j": True, "bits": "AAA="}, "j", "must be an integer"),
    ({"bits": "AAA="}, "j", "is required"),
    ({"j": 0}, "bits", "is required"),
    ({"j": 0, "bits": "AAAA"}, "bits", "must hold 2 bytes"),
    ({"j": 0, "bits": "AAA"}, "bits", "must be 4 base64 characters"),
    ({"j": 0, "bits": 7}, "bits", "must be a base64 string"),
]
HCMS_MALFORMED = [
    ({"j": 4, "l": 0, "bit": 1}, "j", "must be in [0, 4)"),
    ({"j": 0, "l": 8, "bit": 1}, "l", "must be in [0, 8)"),
    ({"j": 0, "l": 0, "bit": 2}, "bit", "must be in [0, 2)"),
    ({"j": 0, "l": 0, "bit": True}, "bit", "must be an integer"),
    ({"j": 0, "l": 0}, "bit", "is required"),
    ({"j": 0, "l": "1", "bit": 0}, "l", "must be an integer"),
]


def malformed(rows: list[tuple[dict[str, Any], str, str]]) -> list[dict[str, Any]]:
    return [{"report": report, "field": field, "reason": reason} for report, field, reason in rows]


def main() -> None:
    documents = {
        "cms.json": {
            "oracle": "cms",
            "description": (
                "report {j, bits}: h_j(v) = xxh32(le64(item_key(v)), seed=j) mod m; bit "
                "h_j(v) is 1 with probability p, every other bit with q = 1 - p "
                "(p = e^(eps/2)/(e^(eps/2)+1)); sketch[j][i] += k (bit_i - q)/(p - q) (the "
                "paper's k (c/2 v~ + 1/2), c = 1/(p - q)); estimate_v = "
                "m/(m-1) ((1/k) sum_j sketch[j][h_j(v)] - n/m). malformed: k = 4, m = 16"
            ),
            "cases": [cms_case(2.0, 4, 16, seed=1), cms_case(4.0, 3, 10, seed=2)],
            "malformed": malformed(CMS_MALFORMED),
        },
        "hcms.json": {
            "oracle": "hcms",
            "description": (
                "report {j, l, bit}: bit = [sign = +1], sign = H[l, h_j(v)] flipped with "
                "probability flip, H[l, c] = (-1)^popcount(l AND c); sketch = (per row j: "
                "M_H[j][l] += k c sign) times H, c = 1/(1 - 2 flip); estimate as for cms. "
                "malformed: k = 4, m = 8"
            ),
            "cases": [hcms_case(1.0, 4, 8, seed=3), hcms_case(2.0, 2, 16, seed=6)],
            "malformed": malformed(HCMS_MALFORMED),
        },
    }
    for name, document in documents.items():
        text = json.dumps(document, indent=1, ensure_ascii=False)
        (HERE / name).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
