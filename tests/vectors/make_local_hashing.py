"""Regenerate hashing.json, blh.json and olh.json (run: .venv/bin/python THIS_FILE).

Every hash, bucket and support here comes from the `xxhash` package one value at a time
(the reference); our oracle code only draws the reports (seeded), so the vectors check our
vectorized hashing rather than repeat it. 64-bit item keys are decimal strings: a JSON
number loses precision beyond 2^53 in many languages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from ldptel.client.oracles import make_oracle

HERE = Path(__file__).parent
STRINGS = [
    "",
    "a",
    "apple",
    "com.example.app/settings",
    "naïve café",
    "日本語",
    "🙂👍🏽",
    "nul\x00byte",
    "a value longer than thirty-two bytes, to run xxh64's stripe loop",
]
SEEDS = [0, 1, 2**31, 2**32 - 1, *np.random.default_rng(2017).integers(0, 2**32, 4).tolist()]
MODULI = [2, 5, 56, 1000]


def key(value: str) -> int:
    return xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


def local_hash(item_key: int, seed: int) -> int:
    return xxhash.xxh32_intdigest(item_key.to_bytes(8, "little"), seed=seed)


def hashing_vectors() -> dict[str, Any]:
    return {
        "description": (
            "item_key = xxh64(utf8(value), seed=0) (decimal string); "
            "hash = xxh32(le64(item_key), seed); input_hex = le64(item_key); mod[g] = hash mod g"
        ),
        "item_keys": [
            {"value": v, "utf8_hex": v.encode("utf-8").hex(), "item_key": str(key(v))}
            for v in STRINGS
        ],
        "local_hash": [
            {
                "value": v,
                "item_key": str(key(v)),
                "input_hex": key(v).to_bytes(8, "little").hex(),
                "seed": seed,
                "hash": local_hash(key(v), seed),
                "mod": {str(g): local_hash(key(v), seed) % g for g in MODULI},
            }
            for v in STRINGS
            for seed in SEEDS
        ],
    }


def oracle_case(name: str, epsilon: float, labels: list[str], **params: int) -> dict[str, Any]:
    oracle: Any = make_oracle(
        name, epsilon=epsilon, domain_size=len(labels), labels=labels, **params
    )
    g = oracle.g
    values = np.arange(len(labels))
    reports = oracle.encode(oracle.perturb_batch(values, np.random.default_rng(len(labels))))
    rows = []
    for v, report in zip(values.tolist(), reports, strict=True):
        h = local_hash(key(labels[v]), report["seed"])
        supports = [
            w
            for w, label in enumerate(labels)
            if local_hash(key(label), report["seed"]) % g == report["y"]
        ]
        rows.append(
            {
                "value": labels[v],
                "index": v,
                "item_key": str(key(labels[v])),
                "seed": report["seed"],
                "hash": h,
                "bucket": h % g,
                "report": report,
                "supports": supports,
            }
        )
    kept = sum(row["report"]["y"] == row["bucket"] for row in rows)
    assert 0 < kept < len(rows), "regenerate with another seed: want kept and flipped reports"
    return {"epsilon": epsilon, "g": g, "p": oracle.p_star, "domain": labels, "reports": rows}


def main() -> None:
    labels = ["apple", "banana", "", "日本語", "🙂", "naïve café", "cherry", "date"]
    numbered = [str(i) for i in range(12)]
    description = (
        "report = {seed, y}; bucket = xxh32(le64(item_key), seed) mod g; y = bucket with "
        "probability p, else another bucket; supports = indices w with "
        "xxh32(le64(item_key(domain[w])), seed) mod g == y"
    )
    documents = {
        "hashing.json": hashing_vectors(),
        "blh.json": {
            "oracle": "blh",
            "description": description + "; g = 2",
            "cases": [oracle_case("blh", 1.0, labels), oracle_case("blh", 0.5, numbered)],
        },
        "olh.json": {
            "oracle": "olh",
            "description": description + "; default g = round(e^eps + 1)",
            "cases": [
                oracle_case("olh", 1.0, labels),  # g = 4 (a power of two)
                oracle_case("olh", 3.0, labels),  # g = 21
                oracle_case("olh", 1.0, numbered, g=5),
            ],
        },
    }
    for name, document in documents.items():
        text = json.dumps(document, indent=1, ensure_ascii=False)
        (HERE / name).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
