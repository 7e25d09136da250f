"""The samplers on the paths users run (benchmarks/README.md, "Samplers on the paths users
run"): one report with the OS CSPRNG (the SDK's `perturb`), the SDK's predraw of a whole
domain at config load (`perturb_batch` of d values with the CSPRNG), and `ldptel simulate`'s
batches (a seeded numpy generator, n = 100,000).

Each oracle runs in a fresh process, so "first" includes the tables the first draw builds.
Times: this thread's CPU time (a shared machine's waits do not count); medians.

    .venv/bin/python benchmarks/samplers.py [--oracles de oue ...] [--json results/x.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

ORACLES = ("de", "sue", "oue", "blh", "olh", "she", "the", "ss", "hr")
EPSILONS = (1.0, 4.0)
REPORT_DOMAINS = (16, 1024, 65536)
PREDRAW_DOMAINS = (1024, 4096)
SIMULATE_DOMAINS = (16, 1024)
SIMULATE_N = 100_000


def cpu_seconds(call: Callable[[], object]) -> float:
    start = time.thread_time()
    call()
    return time.thread_time() - start


def repeated(call: Callable[[], object], budget: float, most: int) -> float:
    """Median CPU seconds of `call` over as many calls as fit in `budget` (at most `most`)."""
    samples: list[float] = []
    spent = 0.0
    while len(samples) < most and (spent < budget or len(samples) < 5):
        samples.append(cpu_seconds(call))
        spent += samples[-1]
    return statistics.median(samples)


def measure(name: str) -> list[dict[str, Any]]:
    from ldptel.client.oracles import make_oracle
    from ldptel.client.randomness import SecureRandom

    try:
        from ldptel.analysis.simulation import simulate, true_counts  # type: ignore[import-not-found]
    except ImportError:
        from ldptel.client.simulation import simulate, true_counts

    rows: list[dict[str, Any]] = []
    for epsilon in EPSILONS:
        for d in REPORT_DOMAINS:
            oracle = make_oracle(name, epsilon=epsilon, domain_size=d)
            values = iter(np.random.default_rng(d).integers(0, d, 1 << 20).tolist())

            def one(oracle: Any = oracle, values: Any = values) -> None:
                oracle.perturb(next(values))

            first = cpu_seconds(one)
            # Blocks of 10 calls: a sample well above the clock's cost and granularity.
            median = repeated(lambda one=one: [one() for _ in range(10)], 0.5, 200) / 10
            rows.append(row(name, "report", d, epsilon, 1, first, median))
        for d in PREDRAW_DOMAINS:
            oracle = make_oracle(name, epsilon=epsilon, domain_size=d)

            def predraw(oracle: Any = oracle, d: int = d) -> None:
                oracle.perturb_batch(np.arange(d), SecureRandom())

            rows.append(
                row(name, "predraw", d, epsilon, d, cpu_seconds(predraw), repeated(predraw, 1.0, 5))
            )
        for d in SIMULATE_DOMAINS:
            oracle = make_oracle(name, epsilon=epsilon, domain_size=d)
            counts = true_counts(SIMULATE_N, d, np.random.default_rng(1))

            def run(oracle: Any = oracle, counts: Any = counts) -> None:
                simulate(oracle, counts, np.random.default_rng(2))

            rows.append(
                row(
                    name,
                    "simulate",
                    d,
                    epsilon,
                    SIMULATE_N,
                    cpu_seconds(run),
                    repeated(run, 2.0, 3),
                )
            )
    return rows


def row(
    name: str, path: str, d: int, epsilon: float, n: int, first: float, median: float
) -> dict[str, Any]:
    return {
        "oracle": name,
        "path": path,
        "d": d,
        "epsilon": epsilon,
        "n": n,
        "first_s": first,
        "median_s": median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--oracles", nargs="+", default=list(ORACLES))
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    rows: list[dict[str, Any]] = []
    for name in args.oracles:
        done = subprocess.run(
            [sys.executable, __file__, "--one", name], capture_output=True, text=True, check=True
        )
        rows += json.loads(done.stdout)
        print(f"{name} done", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"load": os.getloadavg(), "rows": rows}, out, indent=1)
    print("| oracle | path | d | eps | first ms | median |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        unit = (
            f"{r['median_s'] * 1e6:.1f} us"
            if r["path"] == "report"
            else f"{r['median_s'] * 1e3:.1f} ms"
        )
        print(
            f"| {r['oracle']} | {r['path']} | {r['d']} | {r['epsilon']:g} | "
            f"{r['first_s'] * 1e3:.2f} | {unit} |"
        )


if __name__ == "__main__":
    main()
