"""Ingestion and aggregation on one Redis and on a local Redis Cluster of 1, 2 and 3 masters,
and on 3 masters with a replica each, the collectors waiting for it (WAIT), in one run: several
`ldptel collector serve` processes take batches over real HTTP, then several
`ldptel aggregator run --once` workers drain the shards. The load average is sampled every
second and stated beside each row. Besides the rates (bounded by this machine's cores, which
every process shares), it measures what Redis itself spends per report (CPU of the
redis-server processes, memory of the stream entries, replicas included): the per-node
figures a capacity plan is derived from (benchmarks/README.md).

    .venv/bin/python benchmarks/cluster_scaling.py [--seconds 5] [--batch 100] [--shards 12]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import requests
from collector_ingest import cpu_seconds, http_rate, make_body, process_tree

from ldptel.client.campaign import CampaignConfig
from ldptel.store.redis_server import LocalCluster, RedisServer, free_port

ADMIN = "bench-admin-token-0123456789"
RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Topology:
    """One Redis (masters = 0) or a local cluster; `wait` replicas must acknowledge a 202
    (LDPTEL_REDIS_WAIT_REPLICAS)."""

    name: str
    masters: int = 0
    replicas: int = 0
    wait: int = 0


TOPOLOGIES = (
    Topology("redis"),
    Topology("cluster-1", 1),
    Topology("cluster-2", 2),
    Topology("cluster-3", 3),
    Topology("cluster-3+3r wait", 3, replicas=1, wait=1),
)


@contextmanager
def store(topology: Topology) -> Iterator[tuple[str, list[RedisServer]]]:
    """(URL, redis-server nodes) of one Redis or a local cluster."""
    if not topology.masters:
        with RedisServer(appendonly=True) as server:
            yield server.url, [server]
        return
    with LocalCluster(topology.masters, replicas=topology.replicas, appendonly=True) as cluster:
        yield cluster.url, cluster.nodes


class LoadAverage:
    """The machine's 1-minute load average, sampled every second in a thread, so each
    measurement states the load it ran under."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def used_memory(nodes: list[RedisServer]) -> int:
    """Bytes of data over every node (each asked directly)."""
    total = 0
    for node in nodes:
        client = redis.Redis.from_url(node.url)
        total += int(client.info("memory")["used_memory"])
        client.close()
    return total


def pids(nodes: list[RedisServer]) -> list[int]:
    return [node.process.pid for node in nodes if node.process is not None]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_collectors(
    url: str, count: int, wait_replicas: int = 0
) -> list[tuple[subprocess.Popen[bytes], int]]:
    """`count` `ldptel collector serve` processes of one (gevent) worker each."""
    env = {
        **os.environ,
        "LDPTEL_ADMIN_TOKEN": ADMIN,
        "LDPTEL_RATE_LIMIT": "0",
        "LDPTEL_LOG_LEVEL": "WARNING",
        "LDPTEL_REDIS_WAIT_REPLICAS": str(wait_replicas),
    }
    started = []
    for _ in range(count):
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ldptel.cli",
                "collector",
                "serve",
                "--port",
                str(port),
                "--redis-url",
                url,
                "--workers",
                "1",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        started.append((process, port))
    for process, port in started:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "a collector exited at start"
            try:
                if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "a collector did not come up"
            time.sleep(0.1)
    return started


def ingest(
    ports: list[int], token: str, body: bytes, batch: int, seconds: float
) -> dict[str, float]:
    """Every collector under load at once (one client process of 4 threads each)."""
    results: list[dict[str, float]] = []

    def load(port: int) -> None:
        results.append(http_rate(port, token, body, batch, 1, 4, seconds))

    threads = [threading.Thread(target=load, args=(port,)) for port in ports]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "reports": sum(r["reports_per_s"] * r["elapsed"] for r in results),
        "reports_per_s": sum(r["reports_per_s"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }


def aggregate(url: str, workers: int) -> float:
    """Seconds for `workers` concurrent `aggregator run --once` to drain every shard."""
    env = {**os.environ, "LDPTEL_REDIS_URL": url}
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ldptel.cli",
                "aggregator",
                "run",
                "--once",
                "--quiet",
                "--worker-id",
                f"bench-{i}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    for process in processes:
        assert process.wait(timeout=600) == 0
    return time.perf_counter() - started


def drain(url: str, workers: int, redis_pids: list[int]) -> tuple[float, float, float]:
    """(seconds, CPU seconds of the workers, CPU seconds of Redis) of one `aggregate`."""
    redis_before, workers_before = cpu_seconds(redis_pids), children_cpu()
    seconds = aggregate(url, workers)
    return seconds, children_cpu() - workers_before, cpu_seconds(redis_pids) - redis_before


def measure(
    topology: Topology, args: argparse.Namespace, config: CampaignConfig, load: LoadAverage
) -> dict[str, Any]:
    first_sample = len(load.samples)
    with store(topology) as (url, nodes):
        redis_pids = pids(nodes)
        collectors = start_collectors(url, args.collectors, topology.wait)
        try:
            base = f"http://127.0.0.1:{collectors[0][1]}"
            admin = {"Authorization": f"Bearer {ADMIN}"}
            created = requests.post(f"{base}/v1/campaigns", json=config.to_dict(), headers=admin)
            config_id = created.json()["config_id"]
            token = requests.post(f"{base}/v1/tokens", json={"app": "bench"}, headers=admin)
            body = make_body(config, config_id, args.batch)
            ports = [port for _, port in collectors]
            # What a pass costs with nothing to apply (process start, imports, leases): taken
            # off the pass after ingestion, so the figures are per report, not per process.
            idle = drain(url, args.workers, redis_pids)
            memory_before = used_memory(nodes)
            collector_pids = [p for c, _ in collectors for p in process_tree(c.pid)]
            cpu_before = cpu_seconds(redis_pids)
            collector_cpu_before = cpu_seconds(collector_pids)
            loaded = ingest(ports, token.json()["token"], body, args.batch, args.seconds)
            ingest_cpu = cpu_seconds(redis_pids) - cpu_before
            collector_cpu = cpu_seconds(collector_pids) - collector_cpu_before
            memory = used_memory(nodes) - memory_before
        finally:
            for process, _ in collectors:
                process.terminate()
                process.wait(timeout=60)
        full = drain(url, args.workers, redis_pids)
        seconds, workers_cpu, aggregate_cpu = (a - b for a, b in zip(full, idle, strict=True))
    reports = loaded["reports"]
    during = load.samples[first_sample:] or [os.getloadavg()[0]]
    return {
        "topology": topology.name,
        "load_average": sum(during) / len(during),
        "ingest_reports_per_s": loaded["reports_per_s"],
        "ingest_errors": loaded["errors"],
        "redis_cpu_us_per_report_ingest": ingest_cpu / reports * 1e6,
        "collector_cpu_us_per_report": collector_cpu / reports * 1e6,
        "worker_cpu_us_per_report": workers_cpu / reports * 1e6,
        "redis_bytes_per_report": memory / reports,
        "aggregate_reports_per_s": reports / seconds,
        "redis_cpu_us_per_report_aggregate": aggregate_cpu / reports * 1e6,
        "reports": reports,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="ingestion time per topology")
    parser.add_argument("--batch", type=int, default=100, help="reports per request")
    parser.add_argument("--shards", type=int, default=12, help="stream shards of the campaign")
    parser.add_argument("--collectors", type=int, default=2, help="collector processes")
    parser.add_argument("--workers", type=int, default=2, help="aggregator workers")
    parser.add_argument("--oracle", default="oue")
    parser.add_argument("--d", type=int, default=64)
    args = parser.parse_args()
    config = CampaignConfig.from_dict(
        {
            "name": "bench",
            "oracle": args.oracle,
            "epsilon": 1.0,
            "shards": args.shards,
            "domain": [f"v{i}" for i in range(args.d)],
        }
    )
    load = LoadAverage()
    rows = [measure(t, args, config, load) for t in TOPOLOGIES]
    load.stop()
    print(
        f"{os.cpu_count()} CPUs, load average {min(load.samples):.1f}-{max(load.samples):.1f} "
        f"during the run; {args.oracle} d={args.d}, batches of {args.batch}, {args.shards} "
        f"shards, {args.collectors} collectors (1 gevent worker each), {args.workers} workers"
    )
    print(
        "CPU in microseconds per report: Redis (all nodes) while ingesting and aggregating, "
        "the collectors, the aggregator workers"
    )
    print(
        f"{'topology':<18} {'load':>5} {'ingest/s':>9} {'aggregate/s':>11} {'redis in':>9} "
        f"{'redis agg':>9} {'collector':>9} {'worker':>7} {'bytes/report':>12}"
    )
    for row in rows:
        print(
            f"{row['topology']:<18} {row['load_average']:>5.1f} "
            f"{row['ingest_reports_per_s']:>9,.0f} "
            f"{row['aggregate_reports_per_s']:>11,.0f} "
            f"{row['redis_cpu_us_per_report_ingest']:>9.2f} "
            f"{row['redis_cpu_us_per_report_aggregate']:>9.2f} "
            f"{row['collector_cpu_us_per_report']:>9.2f} "
            f"{row['worker_cpu_us_per_report']:>7.2f} "
            f"{row['redis_bytes_per_report']:>12.1f}"
        )
    summary = {
        "args": vars(args),
        "cpus": os.cpu_count(),
        "worker": "gevent",
        "load_average": {"min": min(load.samples), "max": max(load.samples)},
    }
    path = RESULTS / f"cluster_scaling_batch{args.batch}.json"
    path.write_text(json.dumps({**summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
