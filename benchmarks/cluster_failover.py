"""What a Redis Cluster master failover costs under ingest, without and with WAIT
(LDPTEL_REDIS_WAIT_REPLICAS = 0 and 1; docs/operations.md, "Replicas and failover").

Each trial: a local cluster of 3 masters with a replica each (node timeout 1 s), 2
`ldptel collector serve` processes (1 gevent worker each), `--threads` client threads posting
batches of the campaign's one shard, each retried under its Idempotency-Key until 202 (as the
SDK does). After `--before` seconds the shard's master is SIGKILLed; the other masters fail it
and its replica is promoted; once it is, the killed node restarts and rejoins as the new
master's replica. The load runs `--after` seconds more. Counted: acknowledged batches missing
from the new master (lost), batches stored twice (doubled), 503 answers, and the seconds from
the kill to the replica's promotion, and the longest time without any 202 (the outage).

    .venv/bin/python benchmarks/cluster_failover.py [--trials 5] [--threads 8]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import redis
import requests
from cluster_scaling import ADMIN, LoadAverage, start_collectors
from collector_ingest import make_body

from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys
from ldptel.store.redis_server import LocalCluster, RedisServer

RESULTS = Path(__file__).parent / "results"
STREAM = keys.stream("bench", 0)


class Load:
    """Client threads posting batches, each retried under its key until 202."""

    def __init__(self, ports: list[int], token: str, body: bytes, threads: int) -> None:
        self.ports, self.body = ports, body
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.acknowledged: dict[str, float] = {}  # key -> when
        self.statuses: Counter[int] = Counter()  # of the answers that were not 202
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, i: int) -> None:
        session = requests.Session()
        url = f"http://127.0.0.1:{self.ports[i % len(self.ports)]}/v1/reports"
        key = uuid.uuid4().hex
        while not self.stopping.is_set():
            try:
                response = session.post(
                    url, data=self.body, headers={**self.headers, "Idempotency-Key": key}
                )
                status = response.status_code
            except requests.RequestException:
                status = 0
            if status == 202:
                with self.lock:
                    self.acknowledged[key] = time.monotonic()
                key = uuid.uuid4().hex
            else:  # 503 or no answer (0): retried under the same key
                with self.lock:
                    self.statuses[status] += 1
                time.sleep(0.01)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()


def role(node: RedisServer) -> str:
    try:
        with redis.Redis(port=node.port) as client:
            return str(client.info("replication")["role"])
    except redis.ConnectionError:
        return "down"


def wait_for(condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def trial(wait: int, args: argparse.Namespace, config: CampaignConfig) -> dict[str, Any]:
    with LocalCluster(3, replicas=1, node_timeout_ms=1000) as cluster:
        master, (replica,) = cluster.master_of(STREAM)
        collectors = start_collectors(cluster.url, 2, wait)
        try:
            base = f"http://127.0.0.1:{collectors[0][1]}"
            admin = {"Authorization": f"Bearer {ADMIN}"}
            created = requests.post(f"{base}/v1/campaigns", json=config.to_dict(), headers=admin)
            token = requests.post(f"{base}/v1/tokens", json={"app": "bench"}, headers=admin)
            body = make_body(config, created.json()["config_id"], args.batch)
            load = Load([port for _, port in collectors], token.json()["token"], body, args.threads)
            time.sleep(args.before)
            killed_at = time.monotonic()
            master.kill()
            wait_for(lambda: role(replica) == "master")
            promoted_at = time.monotonic()
            master.start()
            wait_for(lambda: role(master) == "slave")
            time.sleep(args.after)
            load.stop()
        finally:
            for process, _ in collectors:
                process.terminate()
                process.wait(timeout=60)
        with redis.Redis(port=replica.port) as store:
            pipe = store.pipeline(transaction=False)
            for key in load.acknowledged:
                pipe.exists(keys.idempotency("bench", 0, key))
            present = pipe.execute()
            marks = sum(1 for _ in store.scan_iter(match=keys.idempotency("bench", 0, "*")))
            entries = store.xlen(STREAM)
    acked = sorted(load.acknowledged.values())
    gaps = [later - earlier for earlier, later in itertools.pairwise(acked)]
    return {
        "wait_replicas": wait,
        "acknowledged": len(load.acknowledged),
        "acknowledged_before_kill": sum(when < killed_at for when in acked),
        "lost": present.count(0),
        "doubled": entries - marks,
        "unavailable_503": load.statuses[503],
        "other_failures": sum(load.statuses.values()) - load.statuses[503],
        "promotion_s": promoted_at - killed_at,
        "longest_without_202_s": max(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5, help="per WAIT setting")
    parser.add_argument("--threads", type=int, default=8, help="client threads")
    parser.add_argument("--batch", type=int, default=10, help="reports per batch")
    parser.add_argument("--before", type=float, default=3.0, help="seconds of load before")
    parser.add_argument("--after", type=float, default=2.0, help="seconds of load after")
    args = parser.parse_args()
    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": "oue", "epsilon": 1.0, "domain": [f"v{i}" for i in range(64)]}
    )
    load = LoadAverage()
    rows = [trial(wait, args, config) for _ in range(args.trials) for wait in (0, 1)]
    load.stop()
    print(
        f"{os.cpu_count()} CPUs, load average {min(load.samples):.1f}-{max(load.samples):.1f}; "
        f"{args.threads} client threads, batches of {args.batch}"
    )
    print(f"{'WAIT':>4} {'acked':>6} {'before kill':>11} {'lost':>4} {'doubled':>7} "
          f"{'503s':>5} {'promoted s':>10} {'no 202 s':>8}")  # fmt: skip
    for row in rows:
        print(
            f"{row['wait_replicas']:>4} {row['acknowledged']:>6} "
            f"{row['acknowledged_before_kill']:>11} {row['lost']:>4} {row['doubled']:>7} "
            f"{row['unavailable_503']:>5} {row['promotion_s']:>10.2f} "
            f"{row['longest_without_202_s']:>8.2f}"
        )
    summary = {
        "args": vars(args),
        "cpus": os.cpu_count(),
        "load_average": {"min": min(load.samples), "max": max(load.samples)},
    }
    path = RESULTS / "cluster_failover.json"
    path.write_text(json.dumps({**summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
