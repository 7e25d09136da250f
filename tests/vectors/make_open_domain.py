"""Regenerate open_domain.json (run: .venv/bin/python THIS_FILE).

Open-domain campaigns (docs/protocol.md, "Open domains"): which texts a client accepts under
max_length and in which form (NFC, UTF-8 bytes), their item keys and sketch hashes, an
open-domain config with its id, and a report built from CMS reports of those texts: each
candidate's estimate, the stderr of a candidate nobody holds and the release threshold.
Everything but the reports (drawn by our oracle, seeded) is computed here in plain Python
from the formulas of docs/protocol.md, so the vectors check the vectorized code.
"""

from __future__ import annotations

import base64
import json
import math
import unicodedata
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import xxhash

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import make_oracle

HERE = Path(__file__).parent
MAX_LENGTH = 12
K, M, EPSILON = 4, 16, 2.0
INPUTS = ["blue", unicodedata.normalize("NFD", "café"), "naïve café", "x" * 13, "tab\there", ""]
REPORTED = ["blue"] * 30 + ["café"] * 12 + ["naïve café"] * 3
CANDIDATES = ["blue", "café", "naïve café", "red"]


def item_key(value: str) -> int:
    return xxhash.xxh64_intdigest(value.encode("utf-8"), seed=0)


def sketch_hash(value: str, j: int) -> int:
    return xxhash.xxh32_intdigest(item_key(value).to_bytes(8, "little"), seed=j) % M


def value_case(text: str) -> dict[str, Any]:
    nfc = unicodedata.normalize("NFC", text)
    size = len(nfc.encode("utf-8"))
    control = any(unicodedata.category(c) == "Cc" for c in nfc)
    accepted = bool(nfc) and not control and size <= MAX_LENGTH
    case: dict[str, Any] = {"input": text, "nfc": nfc, "utf8_bytes": size, "accepted": accepted}
    if accepted:
        case["item_key"] = str(item_key(nfc))  # a string: JSON numbers lose 64-bit precision
        case["hashes"] = [sketch_hash(nfc, j) for j in range(K)]
    return case


def bits(text: str) -> list[int]:
    raw = base64.b64decode(text)
    return [raw[i // 8] >> (7 - i % 8) & 1 for i in range(M)]


def release_case() -> dict[str, Any]:
    oracle: Any = make_oracle("cms", epsilon=EPSILON, domain_size=2, k=K, m=M)
    keys = np.array([item_key(v) for v in REPORTED], dtype=np.uint64)
    reports = oracle.encode(oracle.perturb_keys(keys, np.random.default_rng(7)))
    shrink = math.exp(-EPSILON / 2)
    p, q = 1 / (1 + shrink), shrink / (1 + shrink)
    n = len(reports)
    support = [[0] * M for _ in range(K)]
    for report in reports:
        for i, bit in enumerate(bits(report["bits"])):
            support[report["j"]][i] += bit
    scale = M / (M - 1)
    estimate = [
        scale * ((sum(support[j][sketch_hash(v, j)] for j in range(K)) - n * q) / (p - q) - n / M)
        for v in CANDIDATES
    ]
    # Var at f: (m/(m-1))^2 n (f own + (1 - f) other), own = p(1-p)/(p-q)^2 and other =
    # pi(1 - pi)/(p - q)^2, pi = q + (p - q)/m; the stated stderr adds the fixed family's term
    # sum_w c_w (c_w - 1)/(k (m - 1)), c_w the candidates' estimates rounded, clipped to [0, n].
    pi = q + (p - q) / M

    def variance(f: float) -> float:
        return scale**2 * n * (f * p * (1 - p) + (1 - f) * pi * (1 - pi)) / (p - q) ** 2

    counts = [min(max(round(e), 0), n) for e in estimate]
    family = sum(c * (c - 1) for c in counts) / (K * (M - 1))
    tail = 0.05 / len(CANDIDATES)
    z = NormalDist().inv_cdf(1 - tail)
    top = max(estimate)
    largest = min(n, top + z * math.sqrt(variance(min(1, max(0, top / n)))) + n / (M - 1))
    return {
        "epsilon": EPSILON, "k": K, "m": M, "reported": REPORTED, "reports": reports,
        "candidates": CANDIDATES, "estimate": estimate,
        "null_stderr_with_family": math.sqrt(variance(0) + family),
        "z": z, "count_bound": largest,
        "threshold": release_threshold(n, largest, variance(0), tail, K, M),
        "expected_false_discoveries": 0.05,
    }  # fmt: skip


def binomial(trials: int, p: float) -> list[float]:
    return [math.comb(trials, b) * p**b * (1 - p) ** (trials - b) for b in range(trials + 1)]


def release_threshold(n: int, largest: float, noise: float, tail: float, k: int, m: int) -> float:
    """docs/protocol.md, "Candidates": the expected shortfall at `tail` of N + F, N normal of
    variance `noise` and F the collision offset's worst case, computed exactly (no grid)."""
    c = max(1, min(n, math.ceil(largest)))
    chunks, rest = divmod(n, c)
    offsets: dict[float, float] = {0.0: 1.0}
    for trials, count in ((chunks * k, c), (k, rest)):
        a = m / (m - 1) * count / k
        summed: dict[float, float] = {}
        for f, w in offsets.items():
            for b, pb in enumerate(binomial(trials, 1 / m)):
                key = f + a * (b - trials / m)
                summed[key] = summed.get(key, 0.0) + w * pb
        offsets = summed
    sigma = math.sqrt(noise)

    def exceed(s: float) -> float:
        return sum(w * 0.5 * math.erfc((s - f) / sigma / math.sqrt(2)) for f, w in offsets.items())

    lo, hi = min(offsets) - 40 * sigma, max(offsets) + 40 * sigma
    for _ in range(200):
        lo, hi = (lo, (lo + hi) / 2) if exceed((lo + hi) / 2) <= tail else ((lo + hi) / 2, hi)
    s = hi
    shortfall = 0.0
    for f, w in offsets.items():
        u = (f - s) / sigma  # E[(N + f - s)+] = sigma (phi(u) + u Phi(u))
        shortfall += w * sigma * (NormalDist().pdf(u) + u * NormalDist().cdf(u))
    return s + shortfall / tail


def main() -> None:
    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "cms", "epsilon": EPSILON, "max_length": MAX_LENGTH,
         "params": {"k": K, "m": M}}
    ).as_created()  # fmt: skip
    document = {
        "description": (
            "open-domain values: NFC, at most max_length UTF-8 bytes, no control character, "
            "non-empty; item_key = xxh64(utf8(nfc)), hashes h_j = xxh32(le64(item_key), j) mod "
            "m; the config (no domain) and its id; a release: CMS estimates of candidates, "
            "the stderr of a candidate nobody holds (with the family term), the bound ĉ on "
            "the largest count and the release threshold (expected shortfall of a candidate "
            "nobody holds at 0.05 / c, computed exactly: ldptel's grid puts it at most 2 cells "
            "above)"
        ),
        "max_length": MAX_LENGTH,
        "k": K,
        "m": M,
        "values": [value_case(text) for text in INPUTS],
        "config": config.to_dict(),
        "config_json": config.canonical_json(),
        "config_id": config.config_id,
        "release": release_case(),
    }
    (HERE / "open_domain.json").write_text(
        json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
