"""Regenerate tree.json (run: .venv/bin/python THIS_FILE): memoization "tree" vectors,
computed here from docs/protocol.md ("Tree reports") with plain Python, not ldptel's code.

- per horizon length T: the levels L = floor(log2 T) + 1, the level read in each window t
  (trailing zeros of t + 1), the prefix decomposition of [0, t] (one node per set bit of t + 1);
- an install's node signs: the level-h read windows, and the sign (+1, -1) of its j-th change
  where that change lies in the node ending there, 0 elsewhere;
- the estimator: count = items K L / c * sum of the nodes' +-1 sums, c = (e^eps - 1) /
  (e^eps + 1); per-install variance items K^2 L |D_t| / c^2 - f;
- the storage form: item <u2, level u1, bit u1 (2 = none), column after column.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

HERE = Path(__file__).parent


def read_level(t: int) -> int:
    n, z = t + 1, 0
    while n % 2 == 0:
        n //= 2
        z += 1
    return z


def decomposition(t: int, levels: int) -> list[list[int]]:
    nodes, start = [], 0
    for level in reversed(range(levels)):
        if (t + 1) >> level & 1:
            nodes.append([level, start])
            start += 2**level
    return nodes


def signs(history: list[int], level: int, change: int) -> dict[str, int]:
    """t -> sign at the install's read windows (binary: label 1's indicator, 0 before)."""
    before, seen, sampled, sign = 0, 0, -1, 0
    for t, value in enumerate(history):
        if value != before:
            seen += 1
            if seen == change:
                sampled, sign = t, 1 if value else -1
            before = value
    out = {}
    for t in range(len(history)):
        if read_level(t) == level:
            start = t + 1 - 2**level
            out[str(t)] = sign if start <= sampled <= t else 0
    return out


def main() -> None:
    horizons = []
    for windows in (1, 4, 16, 365):
        levels = len(bin(windows)) - 2
        horizons.append(
            {
                "horizon_windows": windows,
                "levels": levels,
                "read_level": [read_level(t) for t in range(min(windows, 16))],
                "decomposition_of_last": decomposition(windows - 1, levels),
            }
        )
    history = [0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    installs = [
        {
            "history": history,
            "level": level,
            "change": change,
            "signs": signs(history, level, change),
        }
        for level, change in ((0, 1), (0, 2), (1, 2), (2, 3), (4, 1))
    ]
    epsilon, k, levels, items = 1.0, 2, 9, 1
    c = (math.exp(epsilon) - 1) / (math.exp(epsilon) + 1)
    t, n, sums = 364, 1000, [120, -40, 10, 5, -3, 7]
    nodes = len(decomposition(t, levels))
    estimate = {
        "epsilon": epsilon,
        "horizon_windows": 365,
        "max_changes": k,
        "window": t,
        "n": n,
        "node_sums": sums,
        "count": items * k * levels / c * sum(sums),
        "per_install_variance_at_f0": items * k * k * levels * nodes / c**2,
    }
    batch = [(0, 3, 1), (0, 0, 2), (0, 8, 0)]
    packed = b"".join(
        struct.pack(f"<{len(batch)}{code}", *(row[i] for row in batch))
        for i, code in enumerate("HBB")
    )
    storage = {
        "reports": [
            {"item": a, "level": b, **({} if bit == 2 else {"bit": bit})} for a, b, bit in batch
        ],
        "packed_hex": packed.hex(),
    }
    document = {
        "horizons": horizons,
        "installs": installs,
        "estimate": estimate,
        "storage": storage,
    }
    (HERE / "tree.json").write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
