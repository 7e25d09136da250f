"""Regenerate numeric.json (run: .venv/bin/python THIS_FILE).

Numeric campaigns (docs/protocol.md, "Numeric campaigns"): for each mechanism, a config as
created (its integer parameters written by the collector; taken from ldptel), then cases of
one report made from GIVEN random draws (the rounding's 64-bit alpha and the law's uniform
integers, each with its bound), so that a client in another language can check its mapping
from draws to report; and a batch of reports with its support and mean estimate. Rounding,
laws, supports and estimates are computed here in plain Python from the formulas in
docs/protocol.md, not by ldptel's code, so the vectors check it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ldptel.client.campaign import CampaignConfig

HERE = Path(__file__).parent
WORD = 2**64


def created(oracle: str, epsilon: float, low: float, high: float, **params: Any) -> dict[str, Any]:
    data = {"name": "v", "oracle": oracle, "epsilon": epsilon, "range": [low, high]}
    if params:
        data["params"] = params
    config = CampaignConfig.from_dict(data).as_created()
    return {"oracle": config.oracle, "epsilon": epsilon, "range": [low, high], **config.params}


def level_of(config: dict[str, Any], value: float, alpha: int) -> int:
    """Clip, then alpha-point rounding: up iff alpha < ceil(f 2^64) (f = 1: always up)."""
    low, high = config["range"]
    k = config["resolution"]
    clipped = min(max(value, low), high)
    position = (clipped - low) / (high - low) * k
    below = min(math.floor(position), k - 1)
    fraction = position - below
    threshold = math.ceil(math.ldexp(fraction, 64))
    return below + (1 if threshold >= WORD or alpha < threshold else 0)


def level_value(config: dict[str, Any], position: float) -> float:
    low, high = config["range"]
    return low + (high - low) * (position / config["resolution"])


def duchi_report(config: dict[str, Any], level: int, u: int) -> int:
    return 1 if u < config["base"] + config["step"] * level else 0


def duchi_total(config: dict[str, Any]) -> int:
    return 2 * config["base"] + config["step"] * config["resolution"]


def band_total(config: dict[str, Any]) -> int:
    outputs = config["resolution"] + config["band"]
    return outputs * config["light"] + config["band"] * (config["heavy"] - config["light"])


def band_report(config: dict[str, Any], level: int, u: int) -> int:
    extra = config["heavy"] - config["light"]
    banded = config["band"] * extra
    return level + u // extra if u < banded else (u - banded) // config["light"]


def duchi_values(config: dict[str, Any]) -> list[float]:
    shift = config["base"] / config["step"]
    return [level_value(config, -shift), level_value(config, config["resolution"] + shift)]


def band_values(config: dict[str, Any]) -> list[float]:
    w, q = config["band"], config["light"]
    outputs, extra = config["resolution"] + w, config["heavy"] - q
    total = band_total(config)
    intercept = (q * outputs * (outputs - 1) / 2 + extra * w * (w - 1) / 2) / total
    slope = w * extra / total
    return [level_value(config, (j - intercept) / slope) for j in range(outputs)]


def one_report(config: dict[str, Any], level: int, draws: list[int]) -> tuple[Any, list[Any]]:
    """The report of `level` from the law's uniform draws; and the draws with bounds."""
    name = config["oracle"]
    if name in ("duchi", "1bitmean"):
        (u,) = draws
        return {"y": duchi_report(config, level, u)}, [{"below": duchi_total(config), "u": u}]
    if name in ("pm", "sw"):
        (u,) = draws
        return {"y": band_report(config, level, u)}, [{"below": band_total(config), "u": u}]
    if name == "hm":  # one draw below 2^32 picks PM (< mix) or Duchi, then that law's draw
        m, u = draws
        if m < config["mix"]:
            y, bound = band_report(config, level, u), band_total(config)
        else:
            y, bound = (
                config["resolution"] + config["band"] + duchi_report(config, level, u),
                (duchi_total(config)),
            )
        return {"y": y}, [{"below": 2**32, "u": m}, {"below": bound, "u": u}]
    assert name == "dbitflip" and config["sampled"] == config["resolution"] + 1
    d, p, q = config["sampled"], config["heavy"], config["light"]
    bits = [1 if draws[t] < (p if t == level else q) else 0 for t in range(d)]
    return {"j": list(range(d)), "b": bits}, [{"below": p + q, "u": u} for u in draws]


def estimate(config: dict[str, Any], reports: list[Any]) -> dict[str, Any]:
    """Support and mean of a batch of reports (the aggregator's)."""
    n = len(reports)
    name = config["oracle"]
    if name == "dbitflip":
        d, p, q = config["sampled"], config["heavy"], config["light"]
        sampled = [sum(t in r["j"] for r in reports) for t in range(d)]
        ones = [
            sum(b for r in reports for j, b in zip(r["j"], r["b"], strict=True) if j == t)
            for t in range(d)
        ]
        fractions = [d / (n * d) * ((p + q) * ones[t] - q * sampled[t]) / (p - q) for t in range(d)]
        mean = sum(f * level_value(config, t) for t, f in enumerate(fractions))
        # (r m0 sum x^2 + (r - 1) sum f_t x_t^2 + step^2 / 4) / n, r = d / d' (= 1 here).
        x = [level_value(config, t) for t in range(d)]
        m0 = p * q / (p - q) ** 2
        step = (config["range"][1] - config["range"][0]) / config["resolution"]
        square = sum(f * v * v for f, v in zip(fractions, x, strict=True))
        variance = (m0 * sum(v * v for v in x) + 0 * square + step**2 / 4) / n
        return {"support": sampled + ones, "mean": mean, "variance": variance}
    if name in ("duchi", "1bitmean"):
        values = duchi_values(config)
    elif name in ("pm", "sw"):
        values = band_values(config)
    else:
        values = band_values(config) + duchi_values(config)
    support = [sum(r["y"] == code for r in reports) for code in range(len(values))]
    mean = sum(c * v for c, v in zip(support, values, strict=True)) / n
    # The reports' sample variance of their codes' values over n - 1, divided by n.
    spread = sum(c * (v - mean) ** 2 for c, v in zip(support, values, strict=True)) / (n - 1)
    result = {"support": support, "mean": mean, "variance": spread / n}
    if name == "sw":
        result["distribution"] = ems(config, support)
    return result


def ems(config: dict[str, Any], counts: list[int]) -> list[float]:
    """SW's EMS as docs/protocol.md states it (law, start, update, smoothing, stop)."""
    levels, codes = config["resolution"] + 1, config["resolution"] + config["band"]
    total = band_total(config)
    law = [
        [(config["heavy"] if s <= j < s + config["band"] else config["light"]) / total
         for j in range(codes)]
        for s in range(levels)
    ]  # fmt: skip
    x = [1.0 / levels] * levels
    n = sum(counts)
    previous = -math.inf
    for _ in range(10_000):
        predicted = [sum(x[s] * law[s][j] for s in range(levels)) for j in range(codes)]
        likelihood = sum(c * math.log(predicted[j]) for j, c in enumerate(counts) if c > 0)
        if likelihood - previous < 1e-3:
            break
        previous = likelihood
        ratio = [c / max(predicted[j], 1e-300) if c > 0 else 0.0 for j, c in enumerate(counts)]
        x = [x[s] * sum(law[s][j] * ratio[j] for j in range(codes)) / n for s in range(levels)]
        padded = [x[0], *x, x[-1]]
        x = [(padded[i] + 2 * padded[i + 1] + padded[i + 2]) / 4 for i in range(levels)]
        x = [v / sum(x) for v in x]
    return x


def mechanism_vectors(
    config: dict[str, Any], cases: list[tuple[float, int, list[int]]]
) -> dict[str, Any]:
    rows = []
    for value, alpha, draws in cases:
        level = level_of(config, value, alpha)
        report, bounded = one_report(config, level, draws)
        assert all(0 <= d["u"] < d["below"] for d in bounded), bounded
        rows.append(
            {"value": value, "alpha": alpha, "level": level, "draws": bounded, "report": report}
        )
    batch = [row["report"] for row in rows]
    return {"config": config, "cases": rows, "batch": {"reports": batch, **estimate(config, batch)}}


def main() -> None:
    duchi = created("duchi", 1.0, 0.0, 2000.0, resolution=8)
    pm = created("pm", 2.0, -1.0, 1.0, resolution=16)
    sw = created("sw", 1.0, 0.0, 100.0, resolution=8)
    hm = created("hm", 3.0, 0.0, 10.0, resolution=4)
    dbitflip = created("dbitflip", 1.0, 0.0, 100.0, resolution=3)
    top = WORD - 1
    vectors = {
        "description": "value -> clipped -> alpha-point rounding to a level (up iff alpha < "
        "ceil(f 2^64)) -> the mechanism's integer law applied to the given uniform draws "
        "(docs/protocol.md, Numeric campaigns); batch: support, mean estimate, its stated "
        "variance, and for sw the EMS distribution over the levels",
        "mechanisms": [
            mechanism_vectors(
                duchi,
                [
                    (730.0, 0, [0]),  # 730 = level 2.92: up unless alpha >= 0.92 * 2^64
                    (730.0, top, [duchi_total(duchi) - 1]),
                    (-50.0, 12345, [duchi["base"] - 1]),  # clipped to 0: level 0
                    (
                        2000.0,
                        top,
                        [duchi["base"] + 8 * duchi["step"]],
                    ),  # level 8, u at the threshold: 0
                ],
            ),
            mechanism_vectors(
                pm,
                [
                    (0.3, 2**63, [0]),
                    (0.3, 2**63, [band_total(pm) - 1]),
                    (-1.0, 0, [pm["band"] * (pm["heavy"] - pm["light"]) - 1]),
                    (7.5, 0, [band_total(pm) - 12345]),  # clipped to 1: level 16
                ],
            ),
            mechanism_vectors(
                sw,
                [(42.0, 2**62, [0]), (42.0, 3 * 2**62, [band_total(sw) // 2]), (100.0, 1, [5])],
            ),
            mechanism_vectors(
                hm,
                [(3.3, 2**63, [0, 7]), (3.3, 2**63, [2**32 - 1, 7]), (9.0, 0, [hm["mix"], 0])],
            ),
            mechanism_vectors(
                dbitflip,
                [
                    (
                        50.0,
                        2**63,
                        [0, dbitflip["light"], dbitflip["heavy"] - 1, dbitflip["light"] - 1],
                    ),
                    (0.0, 0, [dbitflip["heavy"]] * 4),
                ],
            ),
        ],
    }
    (HERE / "numeric.json").write_text(json.dumps(vectors, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
