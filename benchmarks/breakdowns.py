"""Breakdowns beside multi-freq-ldpy's multidimensional protocols (SPL, SMP, RS+FD, each with
its adaptive GRR/OUE randomizer): RMSE of every two-way marginal cell's count, and the CPU
seconds of aggregation, at the same epsilon, n and attributes, in one run.

The peers estimate one-way marginals of the attributes they are given; to estimate two-way
marginals they are given each user's C(k, 2) pair cells as the attributes (so SMP is the same
design as our `pairs`). Their public output is MI post-processed (non-negative, normalized:
biased); ours is the unbiased estimate. Aggregation CPU: the wire reports to every two-way
marginal (ours: `breakdown_reports(...).state` + `marginal`; theirs: the `*_Aggregator_MI` call).

Run from the repository root: `benchmarks/run breakdowns` (the peers' venv).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ldptel.analysis.breakdown import simulated_rows
from ldptel.client.multi import BREAKDOWNS, Attributes, choose_breakdown
from ldptel.client.multi.wire_flat import breakdown_reports


def _truth(attributes: Attributes, rows: np.ndarray) -> list[np.ndarray]:
    sizes = attributes.sizes
    return [
        np.bincount(rows[:, a] * sizes[b] + rows[:, b], minlength=sizes[a] * sizes[b])
        for a, b in attributes.pairs
    ]


def _ours(
    name: str, epsilon: float, attributes: Attributes, rows: np.ndarray
) -> tuple[list[np.ndarray], float]:
    if name == "auto":
        mechanism, _ = choose_breakdown(epsilon, attributes, rows.shape[0])
    else:
        mechanism = BREAKDOWNS[name](epsilon=epsilon, attributes=attributes)
    reports = [mechanism.perturb_row(tuple(row)) for row in rows.tolist()]
    start = time.process_time()
    state = breakdown_reports(mechanism).state(reports)
    estimates = [mechanism.marginal(state, pair).estimate for pair in attributes.pairs]
    return estimates, time.process_time() - start


def _peer(
    name: str, epsilon: float, attributes: Attributes, rows: np.ndarray
) -> tuple[list[np.ndarray], float]:
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution

    protocols: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "SPL": (SPL_solution.SPL_ADP_Client, SPL_solution.SPL_ADP_Aggregator_MI),
        "SMP": (SMP_solution.SMP_ADP_Client, SMP_solution.SMP_ADP_Aggregator_MI),
        "RS+FD": (RSpFD_solution.RSpFD_ADP_Client, RSpFD_solution.RSpFD_ADP_Aggregator_MI),
    }
    client, aggregator = protocols[name]
    sizes = attributes.sizes
    cells = np.stack([rows[:, a] * sizes[b] + rows[:, b] for a, b in attributes.pairs], axis=1)
    lst_k = [sizes[a] * sizes[b] for a, b in attributes.pairs]
    d = len(lst_k)
    reports = [client(list(row), lst_k, d, epsilon) for row in cells.tolist()]
    start = time.process_time()
    frequencies = aggregator(reports, lst_k, d, epsilon)
    seconds = time.process_time() - start
    return [np.asarray(f, dtype=np.float64) * rows.shape[0] for f in frequencies], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--attributes", default="os:4,plan:3,country:5")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--reps", type=int, default=5, help="runs averaged (fresh rows each)")
    args = parser.parse_args()
    sizes = {k: int(v) for k, v in (part.split(":") for part in args.attributes.split(","))}
    attributes = Attributes.of_sizes(sizes)
    rng = np.random.default_rng(args.seed)
    np.random.seed(args.seed)  # the peers draw from numpy's global generator
    datasets = [simulated_rows(attributes, args.n, rng) for _ in range(args.reps)]
    print(
        f"n={args.n} epsilon={args.epsilon} attributes={args.attributes}, {args.reps} runs "
        f"(two-way cells: {sum(a * b for a, b in _pair_sizes(attributes))})"
    )
    print("| protocol | library | RMSE of two-way cell counts | aggregation CPU s (mean) |")
    print("|---|---|---:|---:|")
    runs = [(f"ours {name}", _ours, name) for name in ("auto", *BREAKDOWNS)]
    runs += [(name, _peer, name) for name in ("SPL", "SMP", "RS+FD")]
    for label, run, name in runs:
        squares, seconds = [], 0.0
        for rows in datasets:
            estimates, cpu = run(name, args.epsilon, attributes, rows)
            truth = np.concatenate(_truth(attributes, rows))
            squares.append((np.concatenate(estimates) - truth) ** 2)
            seconds += cpu
        rmse = float(np.sqrt(np.mean(squares)))
        library = "ldptel" if label.startswith("ours") else "multi-freq-ldpy"
        print(
            f"| {_shown(label, args.epsilon, attributes, args.n)} | {library} | {rmse:,.1f} | "
            f"{seconds / len(datasets):.3f} |",
            flush=True,
        )


def _shown(label: str, epsilon: float, attributes: Attributes, n: int) -> str:
    if label != "ours auto":
        return label.removeprefix("ours ")
    return f"auto (chose {choose_breakdown(epsilon, attributes, n)[0].name})"


def _pair_sizes(attributes: Attributes) -> list[tuple[int, int]]:
    return [(attributes.sizes[a], attributes.sizes[b]) for a, b in attributes.pairs]


if __name__ == "__main__":
    main()
