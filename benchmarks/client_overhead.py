"""Cost of Reporter.report() on the calling thread (benchmarks/README.md, "Client report()
overhead"): ledger check, memo, perturbation and the durable SQLite spool write, per call.

The Reporter starts offline from a cached config (its collector URL is a closed port and its
batches are large), so the sender thread stays asleep and only the caller's work is timed.
Scenarios: a value reported again (the memo is resent: the common case), the first report of
each value (predrawn randomization for d <= 4096, a fresh CSPRNG draw above), and for
reference the oracle's own perturb() with the CSPRNG and the bare SQLite commit.

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


def offline_reporter(state_dir: Path, oracle: str, domain_size: int) -> tuple[Reporter, str]:
    """A Reporter whose campaign config is already cached (as after an earlier fetch)."""
    name = f"bench-{oracle}-{domain_size}"
    config = CampaignConfig.from_dict(
        {
            "name": name,
            "oracle": oracle,
            "epsilon": 1.0,
            "domain": [f"v{i}" for i in range(domain_size)],
            "reports_per_window": 1_000_000,
            "lifetime_epsilon": 1e9,
        }
    )
    store(state_dir, name, Known("active", config, time.time()))
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
    reporter.privacy_spent(name)  # loads the config (and predraws) before timing
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
    reporter, name = offline_reporter(Path(tmp) / f"{oracle}{d}", oracle, d)
    labels = [f"v{i}" for i in range(d)]
    firsts = min(calls, d)
    first = per_call(lambda i: reporter.report(name, labels[i]), firsts)
    again = per_call(lambda i: reporter.report(name, labels[i % firsts]), calls)
    reporter.close(timeout=0)
    return [
        {"oracle": oracle, "d": d, "case": "first report of a value", **first},
        {"oracle": oracle, "d": d, "case": "value reported again", **again},
    ]


def perturb_row(oracle: str, d: int, calls: int) -> dict[str, Any]:
    domain = [str(i) for i in range(d)]
    config = CampaignConfig.from_dict(
        {"name": "x", "oracle": oracle, "epsilon": 1.0, "domain": domain}
    )
    built, rng = config.build_oracle(), SecureRandom()
    cost = per_call(lambda i: built.perturb(i % d, rng), calls)
    return {"oracle": oracle, "d": d, "case": "oracle.perturb alone (ref.)", **cost}


def run(calls: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for oracle, d in (("de", 32), ("olh", 1024), ("de", 4096), ("olh", 65536)):
            rows.extend(reporter_rows(tmp, oracle, d, calls))
        rows.extend(perturb_row(oracle, d, calls) for oracle, d in (("de", 32), ("olh", 1024)))
        commit = bare_commit(tmp, calls)
        rows.append({"oracle": "-", "d": 0, "case": "SQLite commit alone (ref.)", **commit})
    return rows


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
    rows = run(args.calls)
    if args.json:
        print(json.dumps({"load_average": load, "rows": rows}, indent=2))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    print("| oracle | d | case | CPU median µs | CPU mean µs | median µs | mean µs | p99 µs |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['oracle']} | {r['d']} | {r['case']} | {r['cpu_median_us']:.1f} "
            f"| {r['cpu_us']:.1f} | {r['median_us']:.1f} | {r['mean_us']:.1f} | {r['p99_us']:.1f} |"
        )


if __name__ == "__main__":
    main()
