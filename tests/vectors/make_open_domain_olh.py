"""Regenerate open_domain_olh.json (run: .venv/bin/python THIS_FILE).

OLH on an open domain (docs/protocol.md, "olh on open domains"): an open-domain config with
oracle olh and its id; OLH reports of strings built from given draws (seed, keep the bucket
or not, which other bucket), each report's 6-byte log record; the candidates' support counts
over the log, their estimates and the exact variance at f = 0; and the exact release
threshold (K, the smallest count with P(Binomial(n, 1/g) > K) <= 0.05 / c, and T). All in
plain Python (xxhash, fractions) from the formulas of docs/protocol.md; the draws come from
Python's seeded `random`, listed in the file, so the vectors check the vectorized code.
"""

from __future__ import annotations

import json
import math
import random
import struct
from fractions import Fraction
from pathlib import Path
from typing import Any

import xxhash

from ldptel.client.campaign import CampaignConfig

HERE = Path(__file__).parent
EPSILON = 2.0
REPORTED = ["blue"] * 24 + ["café"] * 10 + ["naïve café"] * 6
CANDIDATES = ["blue", "café", "naïve café", "red"]
FALSE_DISCOVERIES = 0.05


def item_key(value: str) -> int:
    return xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


def bucket(value: str, seed: int, g: int) -> int:
    """H(item_key(value), seed) mod g (docs/protocol.md, "Local hash")."""
    return xxhash.xxh32_intdigest(item_key(value).to_bytes(8, "little"), seed=seed) % g


def report(value: str, seed: int, keep: bool, other: int, g: int) -> dict[str, Any]:
    """OLH's report from its draws: y = x if keep, else the `other`-th of the g - 1 buckets
    that are not x (in increasing order)."""
    x = bucket(value, seed, g)
    y = x if keep else other + (other >= x)
    record = struct.pack("<IH", seed, y)  # log record: le32(seed), le16(y)
    return {"value": value, "seed": seed, "keep": keep, "other": other, "x": x, "y": y,
            "record": record.hex()}  # fmt: skip


def binomial_quantile(n: int, q: Fraction, tail: float) -> int:
    """The smallest K with P(Binomial(n, q) > K) <= tail, exactly (rational arithmetic)."""
    pmf = [math.comb(n, b) * q**b * (1 - q) ** (n - b) for b in range(n + 1)]
    above = Fraction(0)  # P(count > K), K from n down
    for k in range(n, -1, -1):
        if above > Fraction(tail):
            return k + 1
        above += pmf[k]
    return 0


def main() -> None:
    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "olh", "epsilon": EPSILON, "max_length": 12}
    ).as_created()
    g = round(math.exp(EPSILON) + 1)
    p = 1.0 / (1.0 + (g - 1) * math.exp(-EPSILON))
    assert (config.params["g"], config.params["p"]) == (g, p)
    draws = random.Random(20240601)
    reports = [
        report(value, draws.randrange(2**32), draws.random() < p, draws.randrange(g - 1), g)
        for value in REPORTED
    ]
    n, q = len(reports), 1 / g
    support = [
        sum(bucket(candidate, r["seed"], g) == r["y"] for r in reports) for candidate in CANDIDATES
    ]
    tail = FALSE_DISCOVERIES / len(CANDIDATES)
    k = binomial_quantile(n, Fraction(1, g), tail)
    document = {
        "description": (
            "open-domain olh: a report is olh's report of item_key(nfc(value)): x = "
            "xxh32(le64(item_key), seed) mod g, y = x kept (keep) or the other-th of the other "
            "g - 1 buckets; log record le32(seed) le16(y); a candidate's support = reports with "
            "H(item_key(candidate), seed) mod g == y, estimate (support - n/g) / (p - 1/g), "
            "null variance n q(1-q)/(p-q)^2 with q = 1/g; release: K the smallest count with "
            "P(Binomial(n, 1/g) > K) <= 0.05 / candidates (exact), threshold (K - n/g)/(p - 1/g)"
        ),
        "config": config.to_dict(),
        "config_id": config.config_id,
        "g": g,
        "p": p,
        "reports": reports,
        "candidates": CANDIDATES,
        "support": support,
        "estimate": [(c - n * q) / (p - q) for c in support],
        "null_variance": n * q * (1 - q) / (p - q) ** 2,
        "tail": tail,
        "K": k,
        "threshold": (k - n * q) / (p - q),
        "listed": [c for c, s in zip(CANDIDATES, support, strict=True) if s > k],
    }
    (HERE / "open_domain_olh.json").write_text(
        json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
