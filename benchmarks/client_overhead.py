"""Cost of Reporter.report() on the calling thread (benchmarks/README.md, "Client report()
overhead"): ledger check, memo, perturbation and the durable SQLite spool write, per call.

The Reporter starts offline from a cached config (its collector URL is a closed port and its
batches are large), so the sender thread stays asleep and only the caller's work is timed.
Scenarios: a report under the default memoization "none" (a fresh CSPRNG draw every time);
under the opt-in "exact_discloses_changes", the first report of a value (drawn) and a value
reported again (its memo resent); for reference the oracle's own perturb() with the CSPRNG and
the bare SQLite commit. Then the cost of loading a cached config at d = 4096 for every oracle
(what the first report() of a campaign pays once): wall time and Python's peak allocation.

    .venv/bin/python benchmarks/client_overhead.py [--calls 5000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ldptel.client import Reporter
from ldptel.client.campaign import CampaignConfig
from ldptel.client.configs import Known, store
from ldptel.client.randomness import SecureRandom


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def cache_config(state_dir: Path, oracle: str, domain_size: int, memoization: str) -> str:
    """Cache a campaign config in state_dir (as after an earlier fetch); returns its name."""
    name = f"bench-{oracle}-{domain_size}-{memoization.split('_')[0]}"
    config = CampaignConfig.from_dict(
        {
            "name": name,
            "oracle": oracle,
            "epsilon": 1.0,
            "domain": [f"v{i}" for i in range(domain_size)],
            "reports_per_window": 1_000_000,
            "lifetime_epsilon": 1e9,
            "memoization": memoization,
        }
    )
    store(state_dir, name, Known("active", config, time.time()))
    return name


def offline_reporter(
    state_dir: Path, oracle: str, domain_size: int, memoization: str = "none"
) -> tuple[Reporter, str]:
    """A Reporter whose campaign config is already cached (as after an earlier fetch)."""
    name = cache_config(state_dir, oracle, domain_size, memoization)
    reporter = Reporter(
        closed_port_url(),
        "bench-token",
        state_dir=state_dir,
        batch_size=5000,
        max_batch_age=3600.0,
        max_spool_rows=10_000_000,
        max_spool_bytes=1 << 34,
        strict=True,  # a failed report() must not be timed as a fast one
    )
    reporter.privacy_spent(name)  # loads the config before timing
    return reporter, name


def per_call(fn: Callable[[int], Any], calls: int) -> dict[str, float]:
    """Microseconds per call: mean, median and p99 of the wall time, mean and median of this
    thread's CPU time (which waiting for a core on a loaded machine does not inflate). A CPU
    sample includes reading the clocks, about 0.5 µs (the thread's CPU clock is a syscall)."""
    walls, cpus = [], []
    for i in range(calls):
        cpu0, wall0 = time.thread_time_ns(), time.perf_counter_ns()
        fn(i)
        walls.append(time.perf_counter_ns() - wall0)
        cpus.append(time.thread_time_ns() - cpu0)
    walls.sort()
    return {
        "mean_us": statistics.fmean(walls) / 1e3,
        "median_us": statistics.median(walls) / 1e3,
        "p99_us": walls[int(0.99 * (len(walls) - 1))] / 1e3,
        "cpu_us": statistics.fmean(cpus) / 1e3,
        "cpu_median_us": statistics.median(cpus) / 1e3,
    }


def reporter_rows(tmp: str, oracle: str, d: int, calls: int) -> list[dict[str, Any]]:
    labels = [f"v{i}" for i in range(d)]
    reporter, name = offline_reporter(Path(tmp) / f"{oracle}{d}", oracle, d)
    fresh = per_call(lambda i: reporter.report(name, labels[i % d]), calls)
    reporter.close(timeout=0)
    exact = "exact_discloses_changes"
    reporter, name = offline_reporter(Path(tmp) / f"{oracle}{d}-exact", oracle, d, exact)
    firsts = min(calls, d)
    first = per_call(lambda i: reporter.report(name, labels[i]), firsts)
    again = per_call(lambda i: reporter.report(name, labels[i % firsts]), calls)
    reporter.close(timeout=0)
    return [
        {"oracle": oracle, "d": d, "case": "report, default (fresh draw)", **fresh},
        {"oracle": oracle, "d": d, "case": "exact memo: first report of a value", **first},
        {"oracle": oracle, "d": d, "case": "exact memo: value reported again", **again},
    ]


ORACLES = ("de", "sue", "oue", "blh", "olh", "she", "the", "ss", "hr", "rappor")


def config_load_rows(tmp: str, d: int = 4096, repeats: int = 5) -> list[dict[str, Any]]:
    """Loading a cached config into a running Reporter (parse, validate, build the oracle,
    index the labels, the randomizer): median wall ms of `repeats` loads, and the peak of
    Python's allocations (tracemalloc) during one."""
    state_dir = Path(tmp) / "load"
    reporter, _ = offline_reporter(state_dir, "de", 2)
    rows = []
    for oracle in ORACLES:
        walls, peak = [], 0
        for _ in range(repeats):
            name = cache_config(state_dir, oracle, d, "none")
            reporter._configs.active.pop(name, None)  # forget it: the next use loads it again
            tracemalloc.start()
            start = time.perf_counter()
            reporter.privacy_spent(name)
            walls.append(time.perf_counter() - start)
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        rows.append(
            {
                "oracle": oracle,
                "d": d,
                "load_ms": statistics.median(walls) * 1e3,
                "peak_mib": peak / 2**20,
            }
        )
    reporter.close(timeout=0)
    return rows


def perturb_row(oracle: str, d: int, calls: int) -> dict[str, Any]:
    domain = [str(i) for i in range(d)]
    config = CampaignConfig.from_dict(
        {"name": "x", "oracle": oracle, "epsilon": 1.0, "domain": domain}
    )
    built, rng = config.build_oracle(), SecureRandom()
    cost = per_call(lambda i: built.perturb(i % d, rng), calls)
    return {"oracle": oracle, "d": d, "case": "oracle.perturb alone (ref.)", **cost}


def run(calls: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for oracle, d in (("de", 32), ("olh", 1024), ("de", 4096), ("olh", 65536)):
            rows.extend(reporter_rows(tmp, oracle, d, calls))
        rows.append(reporter_rows(tmp, "de", 65536, calls)[0])
        rows.extend(perturb_row(oracle, d, calls) for oracle, d in (("de", 32), ("olh", 1024)))
        commit = bare_commit(tmp, calls)
        rows.append({"oracle": "-", "d": 0, "case": "SQLite commit alone (ref.)", **commit})
        loads = config_load_rows(tmp)
    return rows, loads


def bare_commit(tmp: str, calls: int) -> dict[str, float]:
    from ldptel.client import spool
    from ldptel.client.statedb import open_state, transaction

    conn = open_state(Path(tmp) / "bare", (spool.SCHEMA,))

    def one(i: int) -> None:
        with transaction(conn):
            spool.append(conn, "c", "0123456789abcdef", 0, 0.0, '{"y":1}')

    return per_call(one, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    rows, loads = run(args.calls)
    if args.json:
        print(json.dumps({"load_average": load, "rows": rows, "config_load": loads}, indent=2))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    print("| oracle | d | case | CPU median µs | CPU mean µs | median µs | mean µs | p99 µs |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['oracle']} | {r['d']} | {r['case']} | {r['cpu_median_us']:.1f} "
            f"| {r['cpu_us']:.1f} | {r['median_us']:.1f} | {r['mean_us']:.1f} | {r['p99_us']:.1f} |"
        )

    print()
    print("| oracle | d | config load, median ms | peak allocation MiB |")
    print("|---|---:|---:|---:|")
    for r in loads:
        print(f"| {r['oracle']} | {r['d']} | {r['load_ms']:.1f} | {r['peak_mib']:.2f} |")


if __name__ == "__main__":
    main()
