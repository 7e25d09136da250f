"""Regenerate breakdowns.json (run: .venv/bin/python THIS_FILE).

Breakdown reports (docs/breakdowns.md, "Wire form") and the two-way marginals they give,
computed here in plain Python from the papers' formulas (no numpy, no ldptel), so the vectors
check our code rather than repeat it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ATTRIBUTES = {"os": ["android", "ios"], "plan": ["free", "pro", "team"], "country": ["de", "fr"]}


def de(epsilon: float, d: int) -> tuple[float, float]:
    # Wang et al. 2017, Sec. 4.1: p = e^eps / (e^eps + d - 1), q = 1 / (e^eps + d - 1).
    e = math.exp(epsilon)
    return e / (e + d - 1), 1 / (e + d - 1)


def cell_stats(
    n: int, used: int, count: float, set_size: int, p: float, q: float
) -> tuple[float, float]:
    """k-RR's estimate of a set's count among `used` of n reports, scaled to n, and its
    variance at the estimated frequency (docs/breakdowns.md, "Estimates")."""
    estimate = n / used * (count - used * set_size * q) / (p - q)
    f = min(max(estimate / n, 0.0), 1.0)
    inside, outside = p + (set_size - 1) * q, set_size * q
    v_in, v_out = inside * (1 - inside) / (p - q) ** 2, outside * (1 - outside) / (p - q) ** 2
    ldp = used * (f * v_in + (1 - f) * v_out)
    sampling = used * f * (1 - f) * (n - used) / (n - 1)
    return estimate, (n / used) ** 2 * (ldp + sampling)


def joint_case() -> dict[str, Any]:
    epsilon, sizes = 3.0, [len(v) for v in ATTRIBUTES.values()]
    d = math.prod(sizes)  # 12 < 3 e^3 + 2: k-RR
    p, q = de(epsilon, d)
    ys = [0, 0, 1, 5, 5, 5, 7, 11, 11, 3, 0, 6]
    cells = []
    for os_, plan in itertools.product(range(2), range(3)):
        members = {(os_ * 3 + plan) * 2 + c for c in range(2)}
        count = sum(y in members for y in ys)
        estimate, variance = cell_stats(len(ys), len(ys), count, 2, p, q)
        cells.append({"values": [ATTRIBUTES["os"][os_], ATTRIBUTES["plan"][plan]],
                      "estimate": estimate, "variance": variance})  # fmt: skip
    return {"mechanism": "joint", "epsilon": epsilon, "inner": [{"oracle": "de", "p": p, "q": q}],
            "reports": [{"y": y} for y in ys],
            "marginal": {"attributes": ["os", "plan"], "cells": cells}}  # fmt: skip


def pairs_case() -> dict[str, Any]:
    epsilon = 1.0
    labels = list(ATTRIBUTES.values())
    pairs = list(itertools.combinations(range(3), 2))  # (os, plan), (os, country), (plan, country)
    inner = [de(epsilon, len(labels[a]) * len(labels[b])) for a, b in pairs]  # 6, 4, 6 < 10.2
    reports = [(0, 1), (0, 4), (1, 2), (1, 2), (1, 0), (2, 5), (0, 1), (2, 3), (1, 3), (0, 0)]
    n = len(reports)
    a, b = pairs[1]  # the (os, country) marginal
    p, q = inner[1]
    group = [y for j, y in reports if j == 1]
    cells = []
    for y in range(len(labels[a]) * len(labels[b])):
        estimate, variance = cell_stats(n, len(group), group.count(y), 1, p, q)
        values = [labels[a][y // len(labels[b])], labels[b][y % len(labels[b])]]
        cells.append({"values": values, "estimate": estimate, "variance": variance})
    return {"mechanism": "pairs", "epsilon": epsilon,
            "inner": [{"oracle": "de", "p": p, "q": q} for p, q in inner],
            "reports": [{"pair": j, "y": y} for j, y in reports],
            "marginal": {"attributes": ["os", "country"], "cells": cells}}  # fmt: skip


if __name__ == "__main__":
    document = {"attributes": ATTRIBUTES, "cases": [joint_case(), pairs_case()]}
    (HERE / "breakdowns.json").write_text(json.dumps(document, indent=1) + "\n")
