"""Aggregation throughput, stream -> window state, on one worker (one process), against a
private redis-server: reports/s for DE, OUE and OLH at d = 64 and 1024, and the peak of
Python/numpy memory (tracemalloc) at two n, to show it stays flat in n.

    .venv/bin/python benchmarks/aggregate.py [--quick]

Entries are 1000-report batches in the collector's format; one pass drains them with the
default 1000 entries per transaction. Besides wall time, the CPU seconds of the worker
process and of redis-server (INFO cpu), which other jobs on a shared machine disturb far
less. Reports are built separately: "report ms" is the median CPU time of 5 builds.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np
import redis

from ldptel.aggregator.reports import build_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys
from ldptel.store.redis_server import RedisServer
from ldptel.store.registry import Registry

BATCH = 1000
WINDOW = 1_700_006_400
DISTINCT_BATCHES = 16


def fill(client: redis.Redis, config: CampaignConfig, n: int) -> None:
    """n reports in BATCH-sized entries (a few distinct perturbed batches, cycled)."""
    oracle = config.build_oracle()
    rng = np.random.default_rng(0)
    payloads = [
        oracle.pack(oracle.perturb_batch(rng.integers(0, config.domain_size, BATCH), rng))
        for _ in range(DISTINCT_BATCHES)
    ]
    stream = keys.stream(config.name, 0)
    with client.pipeline(transaction=False) as pipe:
        for number in range(n // BATCH):
            fields = {"c": config.config_id, "w": WINDOW, "n": BATCH, "l": ""}
            pipe.xadd(stream, {**fields, "p": payloads[number % DISTINCT_BATCHES]})
            if number % 200 == 199:
                pipe.execute()
        pipe.execute()


def filled(client: redis.Redis, oracle: str, d: int, n: int) -> CampaignConfig:
    """An empty Redis but for one campaign of `oracle` at domain size d, n reports pending."""
    client.flushdb()
    config = CampaignConfig.from_dict(
        {"name": f"bench-{oracle}-{d}", "oracle": oracle, "epsilon": 1.0,
         "domain": [f"v{i}" for i in range(d)]}
    )  # fmt: skip
    register(client, config)
    fill(client, config, n)
    return config


def register(client: redis.Redis, config: CampaignConfig) -> None:
    client.set(keys.config(config.config_id), config.canonical_json())
    client.hset(keys.campaign(config.name), mapping={"config_id": config.config_id})
    client.sadd(keys.campaigns(), config.name)


def measure(url: str, oracle: str, d: int, n: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    config = filled(client, oracle, d, n)
    worker = Worker(client, build_reports=False)
    tracemalloc.start()
    redis_cpu, cpu, started = redis_cpu_seconds(client), time.process_time(), time.perf_counter()
    stats = worker.run_pass()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    redis_cpu = redis_cpu_seconds(client) - redis_cpu
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert stats.reports == n, stats
    builds = []
    for _ in range(5):
        started = time.process_time()
        build_window(client, Registry(client), config.name, WINDOW)
        builds.append(time.process_time() - started)
    client.flushdb()
    client.close()
    return {
        "oracle": oracle, "d": d, "n": n, "seconds": seconds, "rate": n / seconds,
        "cpu": cpu, "redis_cpu": redis_cpu, "peak_mib": peak / 2**20,
        "report_ms": statistics.median(builds) * 1000,
    }  # fmt: skip


def redis_cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller n (a smoke run)")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    sizes = {"de": 2_000_000, "oue": 1_000_000, "olh": 100_000}
    print(
        "| oracle | d | n | seconds | reports/s | worker CPU s | redis CPU s "
        "| peak MiB (tracemalloc) | report ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with RedisServer(appendonly=False) as server:
        for oracle, base in sizes.items():
            for d in (64, 1024):
                for n in (int(base * scale) // 4, int(base * scale)):
                    n = max(BATCH, n // BATCH * BATCH)
                    r = measure(server.url, oracle, d, n)
                    print(
                        f"| {r['oracle']} | {r['d']} | {r['n']:,} | {r['seconds']:.2f} | "
                        f"{r['rate']:,.0f} | {r['cpu']:.3f} | {r['redis_cpu']:.3f} | "
                        f"{r['peak_mib']:.1f} | {r['report_ms']:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
