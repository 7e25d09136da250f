"""Every memoization mode at one lifetime budget, over horizons of T windows (benchmarks/
README.md, "Longitudinal privacy: change tracking against fresh draws and exact resending").

n installs, a binary value (Zipf 1.1 over 2 labels: 68% / 32%), each reporting once per
window for T windows, its value changing C times at uniform windows; each mode at the
largest per-report epsilon its guarantee allows under the lifetime budget L = 10
(ldptel.analysis.longitudinal: fresh draws L / T, exact resending L / (C + 1), the tree L
with K = C + 1). Window RMSE: of one window's frequency estimates, over labels and windows,
mean of squares over `--repeats` populations. The same code as `ldptel simulate --windows`.

    .venv/bin/python benchmarks/longitudinal_tree.py [--installs 20000] [--repeats 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np

from ldptel.analysis.longitudinal import LONGITUDINAL_MODES, histories, run_mode, window_rmse

LIFETIME = 10.0
LAW = np.array([1.0, 2.0**-1.1]) / (1.0 + 2.0**-1.1)


def measure(installs: int, windows: int, changes: int, repeats: int) -> dict[str, Any]:
    squares: dict[str, list[float]] = {mode: [] for mode in LONGITUDINAL_MODES}
    epsilons: dict[str, float] = {}
    for repeat in range(repeats):
        rng = np.random.default_rng([windows, changes, repeat])
        values = histories(LAW, installs, windows, changes, rng)
        truth = np.stack(
            [np.bincount(values[:, t], minlength=2) / installs for t in range(windows)]
        )
        for mode in LONGITUDINAL_MODES:
            found = run_mode(mode, values, 2, LIFETIME, changes, rng)
            squares[mode].append(window_rmse(found.estimates, truth) ** 2)
            epsilons[mode] = found.epsilon
    row: dict[str, Any] = {"windows": windows, "changes": changes}
    for mode in LONGITUDINAL_MODES:
        row[mode] = {
            "epsilon": epsilons[mode],
            "window_rmse": float(np.sqrt(np.mean(squares[mode]))),
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        measure(args.installs, windows, changes, args.repeats)
        for windows in (16, 128, 365, 1024)
        for changes in (0, 1, 5)
    ]
    if args.json:
        print(json.dumps({"load_average": os.getloadavg(), "rows": rows}, indent=2))
        return
    print(f"{args.installs:,} installs x {args.repeats} populations, lifetime epsilon {LIFETIME:g}")
    print(
        "| T | C | fresh eps | fresh RMSE | exact eps | exact RMSE | tree eps, K | tree RMSE "
        "| tree / fresh |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        fresh, exact, tree = (r[mode] for mode in LONGITUDINAL_MODES)
        print(
            f"| {r['windows']} | {r['changes']} | {fresh['epsilon']:.3g} | "
            f"{fresh['window_rmse']:.4f} | {exact['epsilon']:.3g} | {exact['window_rmse']:.4f} "
            f"| {tree['epsilon']:g}, {r['changes'] + 1} | {tree['window_rmse']:.4f} | "
            f"{tree['window_rmse'] / fresh['window_rmse']:.2f} |"
        )


if __name__ == "__main__":
    main()
