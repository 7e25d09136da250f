"""Variance of every registered oracle vs epsilon at d in {16, 1024}: simulation against theory.

Points: the empirical variance of an estimated count per report (mean over items of the
sample variance over repetitions, divided by n), from repeated perturb + support + estimate
of the same Zipf data. Lines: the oracle's exact `variance(n, f)` / n, averaged over items,
on a fine epsilon grid. Writes variance_vs_epsilon.png, results/variance_vs_epsilon.json and
the "## Variance vs epsilon" section of README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import report
from oracles_vs_peers import HERE, SEED, counts, zipf_values

from ldptel.client.oracles import ORACLES, FrequencyOracle, make_oracle

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DOMAIN_SIZES = (16, 1024)
EPSILONS = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
SECTION = "## Variance vs epsilon"


def plotted_oracles() -> list[str]:
    """Registered oracles with an exact unbiased estimator; `auto` only delegates to them and
    RAPPOR's regression decode has no exact variance (see rappor_vs_pureldp.py)."""
    return [n for n, cls in ORACLES.items() if n != "auto" and cls.exact_estimator]


def build(name: str, epsilon: float, d: int) -> FrequencyOracle | None:
    try:
        oracle = make_oracle(name, epsilon=epsilon, domain_size=d)
    except Exception as error:  # an oracle that needs more than (epsilon, d) is skipped
        print(f"skip {name}: {error}", file=sys.stderr)
        return None
    return oracle


def mean_theory(oracle: FrequencyOracle, n: int, f: np.ndarray) -> float:
    return float(np.mean(oracle.variance(n, f))) / n


def simulate(oracle: FrequencyOracle, values: np.ndarray, reps: int) -> dict[str, float]:
    """Empirical mean per-item variance / n over `reps` runs, with a standard error from the
    spread of the per-run mean squared errors (errors against the truth)."""
    n, d = len(values), oracle.domain_size
    true = counts(values, d)
    rng = np.random.default_rng(SEED + d)
    errors = np.empty((reps, d))
    for r in range(reps):
        batch = oracle.perturb_batch(values, rng)
        errors[r] = np.asarray(oracle.estimate(oracle.support(batch), n), float) - true
    per_run = (errors**2).mean(axis=1) / n
    return {
        "empirical": float(errors.var(axis=0, ddof=1).mean() / n),
        "se": float(per_run.std(ddof=1) / math.sqrt(reps)),
        "theory": mean_theory(oracle, n, true / n),
        "reps": reps,
        "n": n,
    }


def run(quick: bool) -> dict[str, Any]:
    n = 500 if quick else 2000
    reps = {16: 30 if quick else 200, 1024: 6 if quick else 40}
    points = []
    curves: dict[str, dict[int, list[tuple[float, float]]]] = {}
    grid = np.linspace(min(EPSILONS), max(EPSILONS), 12 if quick else 56)
    for name in plotted_oracles():
        for d in DOMAIN_SIZES:
            values = zipf_values(d, n, SEED)
            f = counts(values, d) / n
            curve = []
            for eps in grid:
                oracle = build(name, float(eps), d)
                if oracle is not None:
                    curve.append((float(eps), mean_theory(oracle, n, f)))
            if not curve:
                break
            curves.setdefault(name, {})[d] = curve
            for eps in EPSILONS:
                oracle = build(name, eps, d)
                if oracle is None:
                    continue
                t0 = time.perf_counter()
                point = {"oracle": name, "d": d, "epsilon": eps,
                         **simulate(oracle, values, reps[d])}  # fmt: skip
                point["ratio"] = point["empirical"] / point["theory"]
                points.append(point)
                took = time.perf_counter() - t0
                line = f"{name:6s} d={d:<5d} eps={eps:g} ratio {point['ratio']:.3f} ({took:.1f} s)"
                print(line, file=sys.stderr, flush=True)
    return {"points": points, "curves": curves}


def plot(results: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, len(DOMAIN_SIZES), figsize=(13, 5.5), sharey=False)
    colors = plt.get_cmap("tab10")
    for ax, d in zip(axes, DOMAIN_SIZES, strict=True):
        for i, (name, by_d) in enumerate(results["curves"].items()):
            if d not in by_d:
                continue
            eps, var = zip(*by_d[d], strict=True)
            ax.plot(eps, var, color=colors(i % 10), lw=1.3, label=f"{name} (theory)")
            pts = [p for p in results["points"] if p["oracle"] == name and p["d"] == d]
            ax.errorbar(
                [p["epsilon"] for p in pts],
                [p["empirical"] for p in pts],
                yerr=[1.96 * p["se"] for p in pts],
                fmt="o",
                ms=4,
                color=colors(i % 10),
                label=f"{name} (simulated)",
            )
        n = results["points"][0]["n"] if results["points"] else 0
        ax.set(yscale="log", xlabel="epsilon", title=f"d = {d}, n = {n} per run (Zipf data)",
               ylabel="variance of an estimated count / n (mean over items)")  # fmt: skip
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    keep = [(h, lab) for h, lab in zip(handles, labels, strict=True) if "theory" in lab]
    fig.legend([h for h, _ in keep], [lab.replace(" (theory)", "") for _, lab in keep],
               loc="upper center", ncol=len(keep), frameon=False)  # fmt: skip
    fig.text(0.5, 0.005, "lines: exact variance (with the f_v term); points: simulation "
             "± 1.96 standard errors", ha="center", fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    fig.savefig(path, dpi=110)


def markdown(results: dict[str, Any], command: str) -> str:
    points = results["points"]
    worst = max(points, key=lambda p: abs(p["ratio"] - 1))
    la = results["load_average"]
    lines = [
        "![variance vs epsilon](variance_vs_epsilon.png)\n",
        f"Generated by `{command}` on {results['date']} (load average {la[0]:.2f}). "
        f"{len(points)} simulated points for {', '.join(results['curves'])}; empirical / "
        f"exact variance ranges from {min(p['ratio'] for p in points):.3f} to "
        f"{max(p['ratio'] for p in points):.3f} (furthest from 1: {worst['oracle']}, "
        f"d = {worst['d']}, ε = {worst['epsilon']:g}). Data in "
        "`results/variance_vs_epsilon.json`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc)
    load = os.getloadavg()
    results = run(args.quick)
    results["date"] = started.isoformat(timespec="seconds")
    results["load_average"] = load
    suffix = "-quick" if args.quick else ""
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"variance_vs_epsilon{suffix}.json").write_text(
        json.dumps(results, indent=1) + "\n"
    )
    plot(results, HERE / f"variance_vs_epsilon{suffix}.png")
    if not args.quick:
        command = "benchmarks/run variance"
        report.update_readme(HERE / "README.md", SECTION, markdown(results, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
