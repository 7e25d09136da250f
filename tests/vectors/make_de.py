"""Regenerate de.json (run: .venv/bin/python THIS_FILE).

Probabilities come from the paper's formula in plain Python, and supports/estimates are
computed here without numpy, so the vectors check our code rather than repeat it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def de(epsilon: float, d: int) -> tuple[float, float]:
    # Wang et al. 2017, Sec. 4.1: p = e^eps / (e^eps + d - 1), q = 1 / (e^eps + d - 1).
    e = math.exp(epsilon)
    return e / (e + d - 1), 1 / (e + d - 1)


def case(d: int, epsilon: float, ys: list[int]) -> dict[str, Any]:
    p, q = de(epsilon, d)
    support = [ys.count(v) for v in range(d)]
    n = len(ys)
    return {
        "domain_size": d,
        "epsilon": epsilon,
        "p": p,
        "q": q,
        "reports": [{"y": y} for y in ys],
        "support": support,
        "estimate": [(c - n * q) / (p - q) for c in support],
    }


MALFORMED = [
    ({"y": 4}, "y", "must be in [0, 4)"),
    ({"y": -1}, "y", "must be in [0, 4)"),
    ({"y": 1.0}, "y", "must be an integer"),
    ({"y": True}, "y", "must be an integer"),
    ({"y": "1"}, "y", "must be an integer"),
    ({}, "y", "is required"),
    ([1], "report", "must be an object"),
]


def main() -> None:
    vectors = {
        "oracle": "de",
        "description": "report {y}: keep v with p = e^eps/(e^eps+d-1), else another value "
        "uniformly; support_v = #{y = v}; estimate_v = (support_v - n q)/(p - q)",
        "cases": [
            case(2, 1.0, [0, 1, 1, 0, 1]),
            case(4, 0.5, [3, 0, 2, 2, 1, 3, 3]),
            case(16, 4.0, [15, 0, 7, 7, 7, 3]),
        ],
        "malformed": [
            {"domain_size": 4, "report": report, "field": field, "reason": reason}
            for report, field, reason in MALFORMED
        ],
    }
    (HERE / "de.json").write_text(json.dumps(vectors, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
