"""Regenerate she.json and the.json (run: .venv/bin/python THIS_FILE).

Each case: the grid noise table's defining numbers (so a client in another language can check
its table), a report's integers z (drawn by our seeded code), its wire form, and what SHE and
THE make of it. Malformed reports list the field the collector must name.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from ldptel.client.oracles.she import SummationHistogramEncoding
from ldptel.client.oracles.the import ThresholdHistogramEncoding

HERE = Path(__file__).parent
#: (domain_size, epsilon, resolution, true value, THE's theta or None for the default)
CASES = [(4, 1.0, 64, 2, None), (10, 4.0, 16, 0, 0.75), (3, 0.5, 1, 1, None), (6, 2.0, 64, 5, 0.6)]


def noise_facts(oracle: SummationHistogramEncoding) -> dict[str, Any]:
    noise = oracle.noise
    half = noise.weights[noise.half_width :].tolist()
    return {
        "a": noise.a,
        "a_hex": noise.a.hex(),
        "clamp": noise.clamp,
        "half_width": noise.half_width,
        "total": str(noise.total),
        "weights_from_0": [str(w) for w in half[:4]],
        "weight_last_cell": str(half[-2]),
        "weight_tail_cell": str(half[-1]),
        "epsilon_guaranteed": noise.epsilon,
        # As a created config serves it (params.noise; docs/protocol.md, "Noise table").
        "served": noise.table.to_json(),
    }


def encoded(values: list[int]) -> str:
    return base64.b64encode(np.array(values, dtype="<i4").tobytes()).decode("ascii")


def malformed(clamp: int) -> list[dict[str, Any]]:
    good = encoded([0, 64, 0, 0])
    return [
        {"report": "not an object", "field": "report"},
        {"report": {}, "field": "z"},
        {"report": {"z": 12}, "field": "z"},
        {"report": {"z": [0, 64, 0, 0]}, "field": "z"},
        {"report": {"z": "!" * 24}, "field": "z"},
        {"report": {"z": encoded([0, 64, 0])}, "field": "z"},
        {"report": {"z": "AAAAAAAAAAAAAAAAAAAAAAA="}, "field": "z"},
        {"report": {"z": good[:-3] + "B=="}, "field": "z"},
        {"report": {"z": encoded([0, clamp + 1, 0, 0])}, "field": "z"},
        {"report": {"z": encoded([-(2**31), 0, 0, 0])}, "field": "z"},
        {"report": {"z": encoded([-clamp, clamp, 0, 0])}, "field": None},
    ]


def main() -> None:
    she_cases, the_cases = [], []
    for d, eps, R, value, theta in CASES:
        she = SummationHistogramEncoding(epsilon=eps, domain_size=d, resolution=R)
        the = ThresholdHistogramEncoding(epsilon=eps, domain_size=d, resolution=R, theta=theta)
        batch = she.perturb_batch(np.array([value]), np.random.default_rng(2017 + d))
        z = batch["z"][0].tolist()
        common = {"domain_size": d, "epsilon": eps, "resolution": R, "value": value, "z": z}
        common["report"] = she.encode(batch)[0]
        support = she.support(batch)
        she_cases.append(
            {
                **common,
                "noise": noise_facts(she),
                "support": support.tolist(),
                "estimate": she.estimate(support, 1).tolist(),
                "variance_per_report": float(she.variance(1)[0]),
            }
        )
        the_cases.append(
            {
                **common,
                "theta": theta,
                "threshold": the.threshold,
                "p_star": the.p_star,
                "q_star": the.q_star,
                "support": the.support(batch).tolist(),
            }
        )
    bad = {"domain_size": 4, "epsilon": 1.0, "resolution": 64}
    bad["cases"] = malformed(
        SummationHistogramEncoding(epsilon=1.0, domain_size=4, resolution=64).clamp
    )
    description = (
        "z_i = clamp(R [i == v] + N_i, -M, M), N_i from the integer table of docs/protocol.md; "
        "report = {'z': base64(little-endian int32 z)}; big integers are decimal strings"
    )
    for name, cases, extra in [
        (
            "she",
            she_cases,
            "SHE: support = sum of (z + M); estimate = (support - n (M + mu_0)) / (mu_R - mu_0)",
        ),
        ("the", the_cases, "THE: support = #(z > threshold), threshold = floor(theta R)"),
    ]:
        data = {
            "oracle": name,
            "description": f"{description}. {extra}",
            "cases": cases,
            "malformed": bad,
        }
        (HERE / f"{name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
