"""What the sound default costs in accuracy against exact resending (benchmarks/README.md,
"Longitudinal privacy: accuracy of the sound default").

n installs each report once per window for T windows (T = 1, 10, 100); each install's value
changes c times (c = 0, 1, 5; evenly spaced, the new value drawn afresh). Both modes get the
same lifetime budget L (the client's default, 10 epsilon, with epsilon = 1):

- default memoization "none": every report is a fresh draw, charged; T reports fit in L at
  epsilon min(1, L / T) per report (a campaign planning T reports sets that epsilon);
- opt-in "exact_discloses_changes": one draw per (install, value) at epsilon 1, resent; c + 1
  distinct values cost (c + 1) <= L. Its promise is weaker (the change pattern is disclosed).

Both through the real oracle code (perturb_batch, support, estimate). Measured: the RMSE of one
window's frequency estimates (over items and windows, against that window's true
frequencies), and the RMSE of the estimate of the frequencies averaged over the T windows
(where exact resending's noise does not average out: an install resends the same draw).

    .venv/bin/python benchmarks/longitudinal_accuracy.py [--installs 20000] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import FrequencyOracle

LIFETIME = 10.0
EPSILON = 1.0
DOMAIN = 16
ZIPF = 1.1


def zipf_law(d: int) -> NDArray[np.float64]:
    weights = 1.0 / np.arange(1, d + 1) ** ZIPF
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def histories(
    installs: int, windows: int, changes: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """(installs, windows) values: c changes at evenly spaced windows, new values drawn."""
    law = zipf_law(DOMAIN)
    values = np.empty((installs, windows), dtype=np.int64)
    starts = [0] + [(j + 1) * windows // (changes + 1) for j in range(changes)] + [windows]
    for a, b in itertools.pairwise(starts):
        values[:, a:b] = rng.choice(DOMAIN, size=installs, p=law)[:, None]
    return values


def oracle_at(epsilon: float) -> FrequencyOracle:
    domain = [f"v{i}" for i in range(DOMAIN)]
    config = CampaignConfig.from_dict(
        {"name": "b", "oracle": "de", "epsilon": epsilon, "domain": domain}
    )
    return config.build_oracle()


def estimates(
    oracle: FrequencyOracle, batch: dict[str, NDArray[Any]], rows: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Frequency estimates (fractions) from the reports at `rows` of a batch."""
    chosen = {name: column[rows] for name, column in batch.items()}
    return oracle.estimate(oracle.support(chosen), len(rows)) / len(rows)


def window_estimates(
    values: NDArray[np.int64], exact: bool, rng: np.random.Generator
) -> NDArray[np.float64]:
    """(windows, d) estimates. Exact: one draw per (install, value), resent in every window
    of that value; default: a fresh draw per report at min(1, L / T)."""
    installs, windows = values.shape
    if exact:
        oracle = oracle_at(EPSILON)
        # Draw a memo for every (install, value) pair; a window's report is its value's memo.
        memo = oracle.perturb_batch(np.tile(np.arange(DOMAIN), installs), rng)
        rows = np.arange(installs)[:, None] * DOMAIN + values
    else:
        oracle = oracle_at(min(EPSILON, LIFETIME / windows))
        memo = oracle.perturb_batch(values.reshape(-1), rng)
        rows = np.arange(installs * windows).reshape(installs, windows)
    return np.stack([estimates(oracle, memo, rows[:, t]) for t in range(windows)])


def measure(installs: int, windows: int, changes: int, repeats: int) -> dict[str, Any]:
    """RMSEs over `repeats` independent populations (mean squared errors averaged)."""
    squares: dict[str, list[float]] = {}
    for repeat in range(repeats):
        rng = np.random.default_rng([windows, changes, repeat])
        values = histories(installs, windows, changes, rng)
        truth = np.stack(
            [np.bincount(values[:, t], minlength=DOMAIN) / installs for t in range(windows)]
        )
        for name, exact in (("default", False), ("exact", True)):
            found = window_estimates(values, exact, rng)
            mean_error = found.mean(axis=0) - truth.mean(axis=0)
            squares.setdefault(f"{name}_window_rmse", []).append(np.mean((found - truth) ** 2))
            squares.setdefault(f"{name}_mean_rmse", []).append(np.mean(mean_error**2))
    row: dict[str, Any] = {"reports": windows, "changes": changes}
    row.update({key: float(np.sqrt(np.mean(found))) for key, found in squares.items()})
    row["default_epsilon"] = min(EPSILON, LIFETIME / windows)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        measure(args.installs, windows, changes, args.repeats)
        for windows in (1, 10, 100)
        for changes in (0, 1, 5)
        if changes < windows
    ]
    if args.json:
        print(json.dumps({"load_average": os.getloadavg(), "rows": rows}, indent=2))
        return
    print(
        f"{args.installs:,} installs x {args.repeats} populations, DE d={DOMAIN}, "
        f"Zipf {ZIPF}, lifetime budget {LIFETIME:g}"
    )
    print(
        "| reports | changes | default eps/report | window RMSE default | window RMSE exact | "
        "ratio | mean RMSE default | mean RMSE exact | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        window_ratio = r["default_window_rmse"] / r["exact_window_rmse"]
        mean_ratio = r["default_mean_rmse"] / r["exact_mean_rmse"]
        print(
            f"| {r['reports']} | {r['changes']} | {r['default_epsilon']:g} "
            f"| {r['default_window_rmse']:.4f} | {r['exact_window_rmse']:.4f} | "
            f"{window_ratio:.2f} | {r['default_mean_rmse']:.4f} | {r['exact_mean_rmse']:.4f} "
            f"| {mean_ratio:.2f} |"
        )


if __name__ == "__main__":
    main()
