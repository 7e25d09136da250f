"""One worker pass, repeated: the CPU of a pass that counts n reports and of the idle pass
after it, for DE, OLH and OUE, each on a fresh `Worker` over freshly filled streams, median
and minimum of `--repeats` in one process (no tracemalloc: aggregate.py's single traced
pass also measures a new process's first-pass costs).

    .venv/bin/python benchmarks/worker_passes.py [--repeats 8] [--json]

Run it with PYTHONPATH pointing at another checkout to compare two versions side by side
(benchmarks/README.md, "The campaign-kinds refactor beside the commit before it").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import redis
from aggregate import filled

from ldptel.aggregator.worker import Worker
from ldptel.store.redis_server import RedisServer

CASES = (("de", 64, 50_000), ("olh", 64, 10_000), ("oue", 1024, 25_000))


def pass_cpu(client: redis.Redis, oracle: str, d: int, n: int) -> tuple[float, float]:
    """CPU seconds of the pass that counts n reports and of the idle pass after it."""
    filled(client, oracle, d, n)
    worker = Worker(client, build_reports=False)
    started = time.process_time()
    stats = worker.run_pass()
    counted = time.process_time() - started
    assert stats.reports == n, stats
    started = time.process_time()
    worker.run_pass()
    return counted, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        for oracle, d, n in CASES:
            runs = [pass_cpu(client, oracle, d, n) for _ in range(args.repeats)]
            counted, idle = [c for c, _ in runs], [i for _, i in runs]
            rows.append({
                "oracle": oracle, "d": d, "n": n,
                "pass_ms_median": statistics.median(counted) * 1e3,
                "pass_ms_min": min(counted) * 1e3,
                "idle_ms_median": statistics.median(idle) * 1e3,
            })  # fmt: skip
    if args.json:
        print(json.dumps(rows))
        return
    print("| oracle | d | n | pass CPU ms (median) | pass CPU ms (min) | idle pass CPU ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['oracle']} | {row['d']} | {row['n']:,} | {row['pass_ms_median']:.1f} | "
            f"{row['pass_ms_min']:.1f} | {row['idle_ms_median']:.2f} |"
        )


if __name__ == "__main__":
    main()
