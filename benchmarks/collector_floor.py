"""The collector's request against its framework's floor (benchmarks/README.md, "The
collector against a bare Flask app"): `ldptel collector serve` and a bare Flask app that only
XADDs the request body, both on the same gunicorn GeventApplication (CollectorWorker, the
same settings and worker count), each against its own private redis-server (AOF everysec).
Single-report requests and batches of 1000 (OUE, d = 64, the same bodies to both), 3 rounds
alternating collector and floor; requests/s and the server CPU (gunicorn workers +
redis-server, /proc) per request. On a loaded machine the requests/s ratio measures the
run queue more than the servers; the CPU ratio (floor CPU / collector CPU per request) does
not.

    .venv/bin/python benchmarks/collector_floor.py [--seconds 5] [--batches 1,1000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any

import redis
import requests
from collector_ingest import ADMIN, cpu_seconds, free_port, http_rate, make_body, process_tree

from ldptel.client.campaign import CampaignConfig
from ldptel.store.redis_server import RedisServer

ROUNDS = 3
COLUMNS = (
    "batch",
    "round",
    "collector req/s",
    "floor req/s",
    "ratio",
    "collector CPU µs/req",
    "floor CPU µs/req",
    "CPU ratio",
)


def bare_app(redis_url: str) -> Any:
    """The floor: Flask, the body read, one XADD of it, 202."""
    from flask import Flask, request

    app = Flask("floor")
    store = redis.Redis.from_url(redis_url)

    @app.post("/v1/reports")
    def reports() -> tuple[str, int]:
        store.xadd("floor", {"b": request.get_data()})
        return "", 202

    @app.get("/readyz")
    def ready() -> str:
        return "ok"

    return app


def serve_floor(redis_url: str, port: int) -> None:
    from ldptel.collector.serve import GeventApplication, ServeOptions
    from ldptel.collector.worker import BodyLimits

    options = ServeOptions(port=port, workers=2)
    limits = BodyLimits(10, 64 << 20)
    GeventApplication(lambda: bare_app(redis_url), options, limits, name="floor", settings={}).run()


def wait_ready(url: str) -> None:
    for _ in range(300):
        try:
            if requests.get(f"{url}/readyz", timeout=2).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} never became ready")


def create_campaign(url: str, config: CampaignConfig) -> tuple[str, str]:
    """`config` created on the collector at `url`, and an ingest token: (config id, token)."""
    admin = {"Authorization": f"Bearer {ADMIN}"}
    created = requests.post(f"{url}/v1/campaigns", json=config.to_dict(), headers=admin)
    token = requests.post(f"{url}/v1/tokens", json={"app": "bench"}, headers=admin)
    return created.json()["config_id"], token.json()["token"]


def measure(
    port: int, token: str, body: bytes, batch: int, pids: list[int], seconds: float
) -> dict[str, float]:
    before = cpu_seconds(pids)
    result = http_rate(port, token, body, batch, 2, 8, seconds)
    accepted = result["requests_per_s"] * result["elapsed"]
    return {**result, "cpu_us": (cpu_seconds(pids) - before) / max(accepted, 1) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--batches", default="1,1000")
    args = parser.parse_args()
    load = os.getloadavg()
    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": "oue", "epsilon": 1.0, "domain": [f"v{i}" for i in range(64)]}
    )
    with RedisServer(appendonly=True) as ours_redis, RedisServer(appendonly=True) as floor_redis:
        ours_port, floor_port = free_port(), free_port()
        env = {**os.environ, "LDPTEL_ADMIN_TOKEN": ADMIN}
        import subprocess

        collector = subprocess.Popen(
            [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(ours_port),
             "--redis-url", ours_redis.url, "--workers", "2", "--rate-limit", "0"],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        floor = multiprocessing.Process(target=serve_floor, args=(floor_redis.url, floor_port))
        floor.start()
        try:
            url = f"http://127.0.0.1:{ours_port}"
            wait_ready(url)
            wait_ready(f"http://127.0.0.1:{floor_port}")
            config_id, token_value = create_campaign(url, config)
            ours_pids = [*process_tree(collector.pid), ours_redis.process.pid]  # type: ignore[union-attr]
            floor_pids = [*process_tree(floor.pid), floor_redis.process.pid]  # type: ignore[union-attr]
            print(
                f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"
            )
            print("| " + " | ".join(COLUMNS) + " |")
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            for batch in (int(b) for b in args.batches.split(",")):
                body = make_body(config, config_id, batch)
                http_rate(ours_port, token_value, body, batch, 1, 2, 1.0)  # warm up
                http_rate(floor_port, token_value, body, batch, 1, 2, 1.0)
                ratios, cpu_ratios = [], []
                for number in range(1, ROUNDS + 1):
                    ours = measure(ours_port, token_value, body, batch, ours_pids, args.seconds)
                    bare = measure(floor_port, token_value, body, batch, floor_pids, args.seconds)
                    assert ours["errors"] == 0 and bare["errors"] == 0, (ours, bare)
                    ratios.append(ours["requests_per_s"] / bare["requests_per_s"])
                    cpu_ratios.append(bare["cpu_us"] / ours["cpu_us"])
                    print(
                        f"| {batch} | {number} | {ours['requests_per_s']:,.0f} | "
                        f"{bare['requests_per_s']:,.0f} | {ratios[-1]:.2f} | "
                        f"{ours['cpu_us']:,.0f} | {bare['cpu_us']:,.0f} | {cpu_ratios[-1]:.2f} |",
                        flush=True,
                    )
                median, cpu_median = statistics.median(ratios), statistics.median(cpu_ratios)
                print(f"| {batch} | median | | | {median:.2f} | | | {cpu_median:.2f} |")
        finally:
            collector.terminate()
            collector.wait(timeout=60)
            floor.terminate()
            floor.join(timeout=60)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
