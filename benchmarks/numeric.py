"""Numeric mechanisms (issue 17): the mean's MSE vs epsilon for every mechanism beside the
Laplace mechanism applied locally, on a log-normal latency and a bimodal distribution; the
Wasserstein distance of sw's and dbitflip's distribution estimates; time per report on the
client and per million reports in the aggregator's unpack + support + estimate.

The local Laplace baseline adds Laplace(range / eps) noise to each clipped value (floats,
as in textbooks; not float-safe, here only for its MSE 2 (range / eps)^2 / n).
Peers: pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5 (benchmarks/run's peer venv) have no
numeric mechanisms, so Laplace is the comparison.

    .venv/bin/python benchmarks/numeric.py [--quick]
    (prints Markdown, writes results/numeric.json)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldptel.analysis.numeric import simulate_numeric, synthetic_values
from ldptel.client.numeric import NUMERIC_MECHANISMS, NumericMechanism, make_mechanism
from ldptel.client.randomness import SecureRandom

HERE = Path(__file__).resolve().parent
SEED = 17
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: (name, distribution, low, high): latency in ms, and a bimodal level in percent.
DATASETS = (("lognormal latency", "lognormal", 0.0, 2000.0), ("bimodal", "bimodal", 0.0, 100.0))
MECHANISMS = [n for n in NUMERIC_MECHANISMS if n != "auto"]
DISTRIBUTION_MECHANISMS = ("sw", "dbitflip")


def mean_errors(
    mechanism: NumericMechanism, values: np.ndarray, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(empirical MSE of the mean over reps runs, exact variance for these values)."""
    truth = float(mechanism.clip(values).mean())
    errors = [(simulate_numeric(mechanism, values, rng).estimate - truth) ** 2 for _ in range(reps)]
    return float(np.mean(errors)), mechanism.mean_variance(values.size, values)


def laplace_mse(
    values: np.ndarray, low: float, high: float, epsilon: float, reps: int, rng: np.random.Generator
) -> float:
    clipped = np.clip(values, low, high)
    scale = (high - low) / epsilon
    errors = [
        float(np.mean(clipped + rng.laplace(0.0, scale, clipped.size)) - clipped.mean()) ** 2
        for _ in range(reps)
    ]
    return float(np.mean(errors))


def accuracy(n: int, reps: int, n_distribution: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    rows: list[dict[str, Any]] = []
    for label, shape, low, high in DATASETS:
        values = synthetic_values(shape, n, low, high, rng)
        big = synthetic_values(shape, n_distribution, low, high, rng)
        for epsilon in EPSILONS:
            row: dict[str, Any] = {"data": label, "epsilon": epsilon, "range": high - low}
            for name in MECHANISMS:
                mechanism = make_mechanism(name, epsilon=epsilon, low=low, high=high)
                mse, exact = mean_errors(mechanism, values, reps, rng)
                row[name] = {"mse": mse, "exact": exact}
                if name in DISTRIBUTION_MECHANISMS:
                    row[name]["wasserstein"] = simulate_numeric(mechanism, big, rng).wasserstein
            row["laplace"] = {
                "mse": laplace_mse(values, low, high, epsilon, reps, rng),
                "exact": 2 * ((high - low) / epsilon) ** 2 / n,
            }
            rows.append(row)
            print(f"{label} eps={epsilon:g} done", flush=True)
    return {"n": n, "reps": reps, "n_distribution": n_distribution, "rows": rows}


def timing(calls: int, million: int) -> list[dict[str, Any]]:
    """Client: perturb(value) per call (OS CSPRNG) and perturb_batch per report (OS CSPRNG);
    aggregator: unpack + support + mean (+ distribution) per million reports."""
    rng = np.random.default_rng(SEED)
    rows = []
    for name in MECHANISMS:
        mechanism = make_mechanism(name, epsilon=1.0, low=0.0, high=2000.0)
        values = synthetic_values("lognormal", million, 0.0, 2000.0, rng)
        start = time.perf_counter()
        for value in values[:calls].tolist():
            mechanism.perturb(value)
        one = (time.perf_counter() - start) / calls
        start = time.perf_counter()
        mechanism.perturb_batch(values[:100_000], SecureRandom())
        batch_secure = (time.perf_counter() - start) / 100_000
        packed = mechanism.pack(mechanism.perturb_batch(values, rng))
        start = time.perf_counter()
        support = mechanism.support(mechanism.unpack(packed, million))
        mechanism.mean(support, million)
        mechanism.mean_variance_estimate(support, million)
        if mechanism.estimates_distribution:
            mechanism.distribution(support, million)
        aggregate = (time.perf_counter() - start) * 1_000_000 / million
        rows.append(
            {
                "mechanism": name,
                "perturb_us": one * 1e6,
                "batch_secure_us": batch_secure * 1e6,
                "aggregate_s_per_million": aggregate,
                "bytes_per_report": sum(f.nbytes(1) for f in mechanism.fields),
            }
        )
        print(f"timing {name} done", flush=True)
    return rows


def markdown(results: dict[str, Any]) -> str:
    acc = results["accuracy"]
    names = [*MECHANISMS, "laplace"]
    lines = [
        f"n = {acc['n']:,} clients, {acc['reps']} runs per cell; RMSE of the mean as % of the "
        "range (empirical; in brackets the exact prediction from `mean_variance`).",
        "",
        "| data | ε | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for row in acc["rows"]:
        cells = []
        for name in names:
            scale = 100 / row["range"]
            empirical, exact = (math.sqrt(row[name][k]) * scale for k in ("mse", "exact"))
            cells.append(f"{empirical:.3g} ({exact:.3g})")
        lines.append(f"| {row['data']} | {row['epsilon']:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Wasserstein-1 distance of the distribution estimate to the truth (levels' fractions), "
        f"% of the range, n = {acc['n_distribution']:,}, one run:",
        "",
        "| data | ε | " + " | ".join(DISTRIBUTION_MECHANISMS) + " |",
        "|---|---:|" + "---:|" * len(DISTRIBUTION_MECHANISMS),
    ]
    for row in acc["rows"]:
        cells = [
            f"{row[n]['wasserstein'] * 100 / row['range']:.3g}" for n in DISTRIBUTION_MECHANISMS
        ]
        lines.append(f"| {row['data']} | {row['epsilon']:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Time (ε = 1, range [0, 2000]): client `perturb(value)` per call and `perturb_batch` "
        "per report, both from the OS CSPRNG; aggregator unpack + support + mean + variance "
        "estimate (+ EMS / histogram) per million reports.",
        "",
        "| mechanism | bytes/report | perturb(value) µs | batch µs/report | aggregator s / 1M |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in results["timing"]:
        lines.append(
            f"| {row['mechanism']} | {row['bytes_per_report']} | {row['perturb_us']:.1f} | "
            f"{row['batch_secure_us']:.2f} | {row['aggregate_s_per_million']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = parser.parse_args()
    n, reps, big, calls, million = (
        (2_000, 5, 20_000, 200, 100_000) if args.quick else (20_000, 30, 200_000, 2_000, 1_000_000)
    )
    results = {"accuracy": accuracy(n, reps, big), "timing": timing(calls, million)}
    out = HERE / "results" / "numeric.json"
    out.write_text(json.dumps(results, indent=1))
    print(markdown(results))


if __name__ == "__main__":
    main()
