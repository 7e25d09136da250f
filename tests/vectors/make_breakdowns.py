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


def split_case() -> dict[str, Any]:
    """Every attribute by k-RR at epsilon / 3; the (os, plan) cells are sums over the users of
    products of the two indicator estimates (s - q) / (p - q)."""
    epsilon = 3.0
    labels = list(ATTRIBUTES.values())
    inner = [de(epsilon / 3, len(v)) for v in labels]  # 2, 3, 2 values < 3 e + 2: k-RR
    ys = [(0, 0, 1), (1, 2, 0), (0, 1, 1), (0, 0, 0), (1, 1, 1), (1, 2, 1), (0, 2, 0), (1, 0, 0)]
    n = len(ys)

    def indicator(a: int, y: int, x: int) -> float:
        p, q = inner[a]
        return ((y == x) - q) / (p - q)

    def v_in_out(a: int) -> tuple[float, float]:
        p, q = inner[a]
        return p * (1 - p) / (p - q) ** 2, q * (1 - q) / (p - q) ** 2

    one_way = [
        [min(max(sum(indicator(a, y[a], x) for y in ys) / n, 0.0), 1.0) for x in range(len(v))]
        for a, v in enumerate(labels)
    ]
    (in_a, out_a), (in_b, out_b) = v_in_out(0), v_in_out(1)
    cells = []
    for x, z in itertools.product(range(2), range(3)):
        estimate = sum(indicator(0, y[0], x) * indicator(1, y[1], z) for y in ys)
        f = min(max(estimate / n, 0.0), 1.0)
        f_x, f_z = one_way[0][x], one_way[1][z]
        only_x, only_z = min(max(f_x - f, 0.0), 1.0), min(max(f_z - f, 0.0), 1.0)
        neither = min(max(1 - f_x - f_z + f, 0.0), 1.0)
        variance = n * (f * ((in_a + 1) * (in_b + 1) - 1) + only_x * (in_a + 1) * out_b
                        + only_z * out_a * (in_b + 1) + neither * out_a * out_b)  # fmt: skip
        values = [labels[0][x], labels[1][z]]
        cells.append({"values": values, "estimate": estimate, "variance": variance})
    names = list(ATTRIBUTES)
    return {"mechanism": "split", "epsilon": epsilon,
            "inner": [{"oracle": "de", "p": p, "q": q} for p, q in inner],
            "reports": [{f"{names[a]}.y": y[a] for a in range(3)} for y in ys],
            "marginal": {"attributes": ["os", "plan"], "cells": cells}}  # fmt: skip


def hadamard_case() -> dict[str, Any]:
    """Codes of 1 + 2 + 1 bits (os highest); the masks of one attribute's block or two;
    the (plan, country) cells by the inverse transform over the masks inside their blocks."""
    epsilon = 1.0
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    bits = [max(1, (len(v) - 1).bit_length()) for v in ATTRIBUTES.values()]  # 1, 2, 1
    offsets = [sum(bits[a + 1 :]) for a in range(3)]  # 3, 1, 0
    masks = [m << offsets[a] for a in range(3) for m in range(1, 2 ** bits[a])]
    masks += [(ma << offsets[a]) | (mb << offsets[b])
              for a, b in itertools.combinations(range(3), 2)
              for ma in range(1, 2 ** bits[a]) for mb in range(1, 2 ** bits[b])]  # fmt: skip
    reports = [(0, 1), (4, 0), (9, 1), (1, 0), (2, 1), (11, 0), (6, 0), (10, 1), (3, 0), (11, 1)]
    n, t = len(reports), len(masks)
    block = ((2 ** bits[1] - 1) << offsets[1]) | ((2 ** bits[2] - 1) << offsets[2])
    m = bits[1] + bits[2]
    k = t * (2**m - 1) / (2 * p - 1) ** 2
    v_in, v_out = (2 ** (m + 1) - 1 + k) / 4**m - 1, (k - 1) / 4**m
    cells = []
    for plan, country in itertools.product(range(3), range(2)):
        code = (plan << offsets[1]) | (country << offsets[2])
        total = float(n)
        for j, alpha in enumerate(masks):
            if alpha & ~block:
                continue
            sign = -1 if bin(alpha & code).count("1") % 2 else 1
            signs = sum(1 if bit == 0 else -1 for coef, bit in reports if coef == j)
            total += sign * t * signs / (2 * p - 1)
        estimate = total / 2**m
        f = min(max(estimate / n, 0.0), 1.0)
        values = [ATTRIBUTES["plan"][plan], ATTRIBUTES["country"][country]]
        variance = n * (f * v_in + (1 - f) * v_out)
        cells.append({"values": values, "estimate": estimate, "variance": variance})
    return {"mechanism": "hadamard", "epsilon": epsilon, "inner": [], "p": p, "masks": masks,
            "reports": [{"coef": j, "bit": b} for j, b in reports],
            "marginal": {"attributes": ["plan", "country"], "cells": cells}}  # fmt: skip


if __name__ == "__main__":
    cases = [joint_case(), pairs_case(), split_case(), hadamard_case()]
    document = {"attributes": ATTRIBUTES, "cases": cases}
    (HERE / "breakdowns.json").write_text(json.dumps(document, indent=1) + "\n")
