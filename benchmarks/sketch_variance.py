"""Apple's sketch oracles (cms, hcms) against OLH and HR at the same epsilon and d.

Same Zipf(1.1) counts over d = 1024 items for every oracle, perturbed, counted and estimated
`reps` times through each oracle's own code (default parameters: k = m = 1024 for the
sketches). Per oracle and epsilon: the empirical variance of an estimated count per report
(mean over items of the sample variance over repetitions, / n) against the exact
`variance(n, f)` / n; the mean squared error against the true counts / n, which for the
sketches also holds the fixed hash family's offset (over random families the MSE is the
variance plus `family_variance`, printed as "family term"); and the server's
time per repetition (support + estimate) as a ratio to OLH's. Writes
results/sketch_variance.json and the README section.
Run: .venv/bin/python benchmarks/sketch_variance.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from report import update_readme

from ldptel.analysis.simulation import item_probabilities
from ldptel.client.oracles import FrequencyOracle, make_oracle
from ldptel.client.oracles.sketch import SketchOracle

HERE = Path(__file__).resolve().parent
SEED = 20171206  # the paper's publication day
ORACLES = ("cms", "hcms", "olh", "hr")
EPSILONS = (1.0, 2.0, 4.0)
DOMAIN = 1024
SECTION = "## Sketch oracles vs OLH and HR (`sketch_variance.py`)"


def known_counts(n: int, d: int) -> NDArray[np.int64]:
    counts = np.floor(n * item_probabilities(d, "zipf", 1.1)).astype(np.int64)
    counts[0] += n - counts.sum()
    return counts


def family_term(oracle: FrequencyOracle, counts: NDArray[np.int64]) -> float:
    """Mean over items of the fixed family's mean square offset, per report."""
    if not isinstance(oracle, SketchOracle):
        return 0.0
    return float(oracle.family_variance(counts).mean() / counts.sum())


def measure(name: str, epsilon: float, counts: NDArray[np.int64], reps: int) -> dict[str, Any]:
    oracle = make_oracle(name, epsilon=epsilon, domain_size=DOMAIN)
    n = int(counts.sum())
    values = np.repeat(np.arange(DOMAIN), counts)
    rng = np.random.default_rng(SEED)
    estimates = np.empty((reps, DOMAIN))
    server = 0.0
    for r in range(reps):
        batch = oracle.perturb_batch(values, rng)
        start = time.perf_counter()
        estimates[r] = oracle.estimate(oracle.support(batch), n)
        server += time.perf_counter() - start
    errors = estimates - counts
    return {
        "oracle": name,
        "epsilon": epsilon,
        "d": DOMAIN,
        "n": n,
        "reps": reps,
        "empirical": float(estimates.var(axis=0, ddof=1).mean() / n),
        "theory": float(oracle.variance(n, counts / n).mean() / n),
        "mse": float((errors**2).mean() / n),
        "family_term": family_term(oracle, counts),
        "server_seconds": server / reps,
    }


def markdown(results: dict[str, Any]) -> str:
    rows = results["rows"]
    olh = {row["epsilon"]: row["server_seconds"] for row in rows if row["oracle"] == "olh"}
    lines = [
        f"Generated on {results['generated']} (load average {results['load']:.2f}); "
        f"d = {DOMAIN}, n = {results['n']:,} Zipf(1.1) reports, {results['reps']} repetitions "
        "per row, default parameters (sketches: k = m = 1024). Variance and MSE are per "
        "report (Var[estimated count] / n, averaged over items); the sketches' MSE also holds "
        "the fixed hash family's offset: over random families MSE = exact variance + family "
        "term. Server time is support + estimate per repetition, as a ratio to OLH's.",
        "",
        "| ε | oracle | empirical variance | exact variance | empirical / exact | MSE | "
        "family term | server time / OLH |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['epsilon']:g} | {row['oracle']} | {row['empirical']:.4g} | "
            f"{row['theory']:.4g} | {row['empirical'] / row['theory']:.3f} | {row['mse']:.4g} | "
            f"{row['family_term']:.2g} | {row['server_seconds'] / olh[row['epsilon']]:.3g} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small n and few repetitions")
    args = parser.parse_args()
    n, reps = (4_000, 6) if args.quick else (20_000, 20)
    counts = known_counts(n, DOMAIN)
    rows = []
    for epsilon in EPSILONS:
        for name in ORACLES:
            row = measure(name, epsilon, counts, reps)
            print(json.dumps(row))
            rows.append(row)
    results = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load": os.getloadavg()[0],
        "n": n,
        "reps": reps,
        "rows": rows,
    }
    if args.quick:
        print(markdown(results))
        return
    (HERE / "results" / "sketch_variance.json").write_text(json.dumps(results, indent=1) + "\n")
    update_readme(HERE / "README.md", SECTION, markdown(results))


if __name__ == "__main__":
    main()
