"""Dashboard page times with 365 windows x 1,000 items (issue 18).

A private redis-server holds one campaign (DE, epsilon 1, d = 1000) and 365 stored window
documents built by the aggregator's own `build_report` from synthetic supports (each window's
counts are Binomial draws around a drifting Zipf law, n = 100,000), saved with `store_window`
as the aggregator saves them. The dashboard app is then asked for its pages in-process (Flask's
test client: the server's time, without the network):

- cold: the first request of a fresh app, which reads and checks all 365 documents;
- warm: the median of 5 later requests (documents cached by their stored version).

Run: .venv/bin/python benchmarks/dashboard.py [--windows 365] [--items 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time

import numpy as np
import redis

from ldptel.aggregator.reports import ReportOptions, store_window
from ldptel.aggregator.reports.categorical import build_report
from ldptel.aggregator.state import StateKey
from ldptel.client.campaign import DAY, CampaignConfig
from ldptel.dashboard import create_app
from ldptel.store.redis_server import RedisServer
from ldptel.store.registry import Registry
from ldptel.store.reports import iso

START = 1_700_006_400 - 1_700_006_400 % DAY


def fill(client: redis.Redis, windows: int, items: int, n: int = 100_000) -> str:
    """Register the campaign and store `windows` window documents; returns its name."""
    config = CampaignConfig.from_dict(
        {
            "name": "bench",
            "oracle": "de",
            "epsilon": 1.0,
            "domain": [f"item-{i}" for i in range(items)],
        }
    )
    Registry(client).create(config)
    oracle = config.build_oracle()
    rng = np.random.default_rng(1)
    weights = 1.0 / np.arange(1, items + 1) ** 1.1
    for number in range(windows):
        drift = np.roll(weights, number % 7)  # a weekly pattern
        p = drift / drift.sum()
        values = rng.choice(items, size=n, p=p)
        batch = oracle.perturb_batch(values, rng)
        support = oracle.support(batch)
        window = START + number * DAY
        state = StateKey(window, config.config_id, "")
        report = build_report(config, oracle, state, n, support, ReportOptions(), time.time())
        store_window(
            client,
            {"campaign": config.name, "window": report["window"], "built_at": iso(time.time()),
             "reports": [report]},
        )  # fmt: skip
    return config.name


def timed(app_client: object, path: str) -> tuple[float, float, int]:
    """Wall and CPU seconds of one request (the machine is shared: CPU is the steadier)."""
    started, cpu = time.perf_counter(), time.process_time()
    response = app_client.get(path)  # type: ignore[attr-defined]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert response.status_code == 200, (path, response.status_code, response.data[:200])
    return seconds, cpu, len(response.data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=365)
    parser.add_argument("--items", type=int, default=1000)
    args = parser.parse_args()
    with RedisServer(appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        started = time.perf_counter()
        name = fill(client, args.windows, args.items)
        print(f"filled {args.windows} windows x {args.items} items in "
              f"{time.perf_counter() - started:.1f} s; "
              f"{client.info('memory')['used_memory'] / 2**20:.0f} MiB in Redis")  # fmt: skip
        paths = {
            "campaign page (3 trends)": f"/campaigns/{name}",
            "campaign page (12 trends)": f"/campaigns/{name}?"
            + "&".join(f"items=item-{i}" for i in range(12)),
            "change.json": f"/campaigns/{name}/change.json",
            "trend.csv (3 items)": f"/campaigns/{name}/trend.csv",
            "campaign list": "/",
        }
        results = {}
        for label, path in paths.items():
            app = create_app(client).test_client()
            cold, cold_cpu, size = timed(app, path)
            runs = [timed(app, path) for _ in range(5)]
            warm = statistics.median(r[0] for r in runs)
            warm_cpu = statistics.median(r[1] for r in runs)
            results[label] = {"cold_s": cold, "cold_cpu_s": cold_cpu, "warm_s": warm,
                              "warm_cpu_s": warm_cpu, "bytes": size}  # fmt: skip
            print(f"{label:26s} cold {cold * 1000:7.0f} ms (cpu {cold_cpu * 1000:7.0f})  "
                  f"warm {warm * 1000:6.1f} ms (cpu {warm_cpu * 1000:6.1f})  "
                  f"{size / 1024:5.0f} KiB")  # fmt: skip
        load = os.getloadavg()[0]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(f"load average {load:.1f}; peak RSS of this process {peak:.0f} MiB (fill included)")
        print(json.dumps({"windows": args.windows, "items": args.items, "load": load,
                          "peak_rss_mib": peak, **results}))  # fmt: skip


if __name__ == "__main__":
    main()
