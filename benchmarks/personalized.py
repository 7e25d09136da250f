"""Personalized privacy: the optimal combination of privacy levels against the Minimum and
Threshold baselines, in the setting of Jorgensen, Cormode, Yu ("Conservative or Liberal?
Personalized Differential Privacy", ICDE 2015), adapted to the local model.

Users: conservative (54%, epsilon uniform in [0.01, 0.2]), moderate (37%, uniform in
[0.2, 1.0]) and liberal (9%, epsilon exactly 1.0); values Zipf(1.1) over d = 64 items,
independent of the level; every user reports once with OLH through the oracle's own code.

Per-user continuous epsilons are bucketed into a campaign's privacy levels: each user's
epsilon is rounded DOWN to a grid of 16 levels (0.01, 0.05, 0.1, 0.15, then 12 evenly spaced
from 0.2 to 1.0), so every user gets at least the privacy asked for. The grid's cost against
per-user epsilons (information summed user by user) is reported too.

Strategies (each a CampaignConfig with these levels; ldptel.analysis.simulation.simulate_levels
perturbs and combines exactly as the SDK and the aggregator do):
- optimal: each level at its epsilon, per-level estimates combined with inverse-variance
  weights;
- minimum: everyone at the smallest level epsilon (0.01);
- threshold t = 0.2 and t = 1.0: levels below t do not report, the rest report at t;
- sample t = 0.2 and t = 1.0: the paper's Sample mechanism in the local model
  (ldptel.client.levels.SampleOracle): a level below t sends a t-report of its true value
  with probability (e^eps - 1)/(e^t - 1), else of a uniform value; the rest report at t.
Every strategy estimates the frequency of each item among its reporting users and scales by
the population n (known): for Threshold that extrapolates from the reporters, unbiased here
because values do not depend on the level.

Queries: the histogram (all 64 item counts) and 100 count queries (the count of a random
range of items, fixed by the seed). RMSE over repetitions against the true counts of the
population. Writes personalized_rmse.png and results/personalized.json, prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.simulation import item_probabilities, simulate_levels, split_users
from ldptel.client.campaign import CampaignConfig
from ldptel.client.levels import SAMPLE

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
SEED = 20150413
DOMAIN = 64
ZIPF = 1.1
GROUPS = {  # name: (fraction, lowest epsilon, highest epsilon)
    "conservative": (0.54, 0.01, 0.2),
    "moderate": (0.37, 0.2, 1.0),
    "liberal": (0.09, 1.0, 1.0),
}
GRID = np.array([0.01, 0.05, 0.1, 0.15, *np.linspace(0.2, 1.0, 12)])
STRATEGIES = {  # label: (level_strategy, level_threshold)
    "optimal": ("optimal", None),
    "minimum": ("minimum", None),
    "threshold t=0.2": ("threshold", 0.2),
    "threshold t=1.0": ("threshold", 1.0),
    "sample t=0.2": (SAMPLE, 0.2),
    "sample t=1.0": (SAMPLE, 1.0),
}
NS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
REPS = {10_000: 400, 30_000: 200, 100_000: 100, 300_000: 40, 1_000_000: 20}
QUERIES = 100


def level_name(epsilon: float) -> str:
    return f"eps{round(epsilon * 1000):04d}"


def config(strategy: str, threshold: float | None) -> CampaignConfig:
    # Sample is simulated only: threshold's config (same t) with the strategy swapped in.
    created = CampaignConfig.from_dict(
        {
            "name": "personalized",
            "oracle": "olh",
            "epsilon": 1.0,
            "domain": [f"item{i}" for i in range(DOMAIN)],
            "levels": {level_name(e): float(e) for e in GRID},
            "level_strategy": "threshold" if strategy == SAMPLE else strategy,
            "level_threshold": threshold,
        }
    )
    return replace(created, level_strategy=strategy)


def user_epsilons(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Each user's requested epsilon, by group (group sizes split exactly by fraction)."""
    sizes = split_users(n, {group: spec[0] for group, spec in GROUPS.items()})
    parts = [rng.uniform(GROUPS[g][1], GROUPS[g][2], size) for g, size in sizes.items()]
    return np.concatenate(parts)


def bucket(epsilons: NDArray[np.float64]) -> NDArray[np.int64]:
    """Index of the largest grid level <= each epsilon (never more epsilon than asked)."""
    # A tiny tolerance so that an epsilon equal to a grid point computed in floating point
    # (0.2 + k * 0.8 / 11) lands on it; everything at or above 0.01 has a level.
    index = np.searchsorted(GRID, epsilons * (1 + 1e-12), side="right") - 1
    return np.asarray(index, dtype=np.int64)


def population(
    n: int, rng: np.random.Generator
) -> tuple[dict[str, NDArray[np.int64]], NDArray[np.int64], NDArray[np.float64]]:
    """Per level the true counts of its users, the population's counts, and the epsilons."""
    epsilons = user_epsilons(n, rng)
    values = rng.choice(DOMAIN, size=n, p=item_probabilities(DOMAIN, "zipf", ZIPF))
    levels = bucket(epsilons)
    table = np.bincount(levels * DOMAIN + values, minlength=GRID.size * DOMAIN)
    table = table.reshape(GRID.size, DOMAIN).astype(np.int64)
    counts = {level_name(e): table[i] for i, e in enumerate(GRID)}
    return counts, table.sum(axis=0), epsilons


def ranges(rng: np.random.Generator) -> NDArray[np.float64]:
    """QUERIES random item ranges [a, b] as 0/1 rows: a count query is a row times counts."""
    ends = np.sort(rng.integers(0, DOMAIN, size=(QUERIES, 2)), axis=1)
    items = np.arange(DOMAIN)
    return ((items >= ends[:, :1]) & (items <= ends[:, 1:])).astype(np.float64)


def report_variance(base: CampaignConfig, epsilons: NDArray[np.float64]) -> NDArray[np.float64]:
    """f_v = 0 variance of one report at each epsilon, with the config's oracle (OLH: the
    same for every item)."""
    return np.array(
        [float(np.max(base.build_oracle(float(e)).variance(1, None))) for e in epsilons]
    )


class Bucketing:
    """What rounding epsilons down to GRID costs: the per-user variance of the optimal
    combination with the grid's levels over the one with every user at their own epsilon
    (to 0.001, rounded down), both from the exact f_v = 0 variances."""

    def __init__(self, base: CampaignConfig) -> None:
        self.fine = np.round(np.arange(10, 1001) / 1000, 3)
        self.fine_variance = report_variance(base, self.fine)
        self.grid_variance = report_variance(base, GRID)

    def ratio(self, epsilons: NDArray[np.float64]) -> float:
        fine = np.searchsorted(self.fine, epsilons * (1 + 1e-12), side="right") - 1
        ideal = np.sum(1.0 / self.fine_variance[fine])
        bucketed = np.sum(1.0 / self.grid_variance[bucket(epsilons)])
        return float(ideal / bucketed)


def run(ns: tuple[int, ...], reps: dict[int, int]) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    configs = {label: config(*spec) for label, spec in STRATEGIES.items()}
    queries = ranges(rng)
    bucketing = Bucketing(configs["optimal"])
    rows = []
    for n in ns:
        started = time.perf_counter()
        squared: dict[str, dict[str, list[float]]] = {
            label: {"histogram": [], "count": [], "predicted": []} for label in STRATEGIES
        }
        ratios = []
        for _ in range(reps[n]):
            counts, truth, epsilons = population(n, rng)
            ratios.append(bucketing.ratio(epsilons))
            for label, campaign in configs.items():
                combination = simulate_levels(campaign, counts, rng).combination
                scale = n / combination.n  # population n / reporting users
                error = scale * combination.estimate - truth
                squared[label]["histogram"].append(float(np.mean(error**2)))
                squared[label]["count"].append(float(np.mean((queries @ error) ** 2)))
                # The LDP noise alone: the exact variance the aggregator reports, scaled.
                variance = scale**2 * combination.variance(truth / n)
                squared[label]["predicted"].append(float(np.mean(variance)))
        row: dict[str, Any] = {"n": n, "reps": reps[n], "seconds": time.perf_counter() - started}
        for label, values in squared.items():
            row[label] = {key: math.sqrt(float(np.mean(v))) for key, v in values.items()}
        row["bucketing_variance_ratio"] = float(np.mean(ratios))
        rows.append(row)
        print(summary_line(row), flush=True)
    return {
        "setting": {
            "groups": {g: list(spec) for g, spec in GROUPS.items()},
            "grid": GRID.tolist(),
            "oracle": "olh",
            "domain": DOMAIN,
            "zipf": ZIPF,
            "queries": QUERIES,
            "seed": SEED,
        },
        "rows": rows,
    }


def summary_line(row: dict[str, Any]) -> str:
    cells = ", ".join(
        f"{label} {row[label]['histogram']:.0f}/{row[label]['count']:.0f}" for label in STRATEGIES
    )
    timing = f"n={row['n']:>9,} reps={row['reps']:>3} {row['seconds']:5.1f}s"
    return f"{timing}  RMSE histogram/count: {cells}"


def plot(results: dict[str, Any], path: Path) -> None:
    rows = results["rows"]
    ns = [row["n"] for row in rows]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharex=True)
    styles = {
        "optimal": ("#1f4fb0", "o"),
        "minimum": ("#c0392b", "s"),
        "threshold t=0.2": ("#d89a3b", "^"),
        "threshold t=1.0": ("#2e8b57", "v"),
        "sample t=0.2": ("#8e44ad", "D"),
        "sample t=1.0": ("#7f8c8d", "P"),
    }
    for axis, query, title in (
        (axes[0], "count", "count queries (random item ranges)"),
        (axes[1], "histogram", "histogram (all 64 item counts)"),
    ):
        for label, (color, marker) in styles.items():
            relative = [row[label][query] / row["n"] for row in rows]
            axis.plot(ns, relative, marker=marker, color=color, label=label)
        predicted = [row["optimal"]["predicted"] / row["n"] for row in rows]
        if query == "histogram":
            axis.plot(ns, predicted, ":", color="#1f4fb0", label="optimal, exact variance")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("users n")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("RMSE / n")
    handles, labels = axes[1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    figure.suptitle(
        "Personalized privacy, local model (OLH, d = 64, Zipf 1.1): users 54% eps~U[0.01,0.2], "
        "37% eps~U[0.2,1], 9% eps=1",
        fontsize=10,
    )
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 100,000, few repetitions")
    args = parser.parse_args()
    ns = NS[:3] if args.quick else NS
    reps = {n: max(2, r // 8) for n, r in REPS.items()} if args.quick else REPS
    started = time.perf_counter()
    results = run(ns, reps)
    results["seconds"] = time.perf_counter() - started
    suffix = "-quick" if args.quick else ""
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"personalized{suffix}.json").write_text(json.dumps(results, indent=1))
    plot(results, HERE / f"personalized_rmse{suffix}.png")
    print(f"done in {results['seconds']:.0f} s")


if __name__ == "__main__":
    main()
