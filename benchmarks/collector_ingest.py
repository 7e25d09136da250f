"""Collector ingestion end to end: reports/s accepted over HTTP (auth + JSON + oracle
validation + one Lua XADD round trip) by `ldptel collector serve` (gunicorn, gevent), for
single-report requests and batches of 100 and 1000, beside the raw redis-py pipelined
per-report XADD ceiling measured on the same redis-server in the same run.

    .venv/bin/python benchmarks/collector_ingest.py [--seconds 5] [--oracle oue] [--d 64]

The load generator runs on the same machine: a few processes of threads, each a keep-alive
raw-socket HTTP/1.1 client sending pre-encoded bodies with a fresh Idempotency-Key per request.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import redis
import requests

from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys
from ldptel.store.redis_server import RedisServer, free_port

ADMIN = "bench-admin-token-0123456789"


def raw_xadd_rate(url: str, payload: bytes, n: int, chunk: int = 1000) -> float:
    """Reports/s of redis-py pipelined XADD, one stream entry per report."""
    client = redis.Redis.from_url(url)
    stream = "bench:raw"
    client.delete(stream)
    started = time.perf_counter()
    for start in range(0, n, chunk):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(chunk, n - start)):
            pipe.xadd(stream, {"c": "0123456789abcdef", "w": "0", "p": payload})
        pipe.execute()
    seconds = time.perf_counter() - started
    assert client.xlen(stream) == n
    client.delete(stream)
    client.close()
    return n / seconds


def _recv_response(sock: socket.socket, buffer: bytearray) -> int:
    """Read one HTTP response from a keep-alive socket; returns its status."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        buffer += data
    head_end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:head_end])
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(buffer) < head_end + length:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        buffer += data
    del buffer[: head_end + length]
    return status


def _client_process(
    port: int, token: str, body: bytes, threads: int, seconds: float, tag: str, out: Any
) -> None:
    head = (
        "POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\nIdempotency-Key: "
    ).encode()
    counts: list[tuple[int, int]] = []
    deadline = time.monotonic() + seconds

    def worker(number: int) -> None:
        ok = errors = 0
        sock = socket.create_connection(("127.0.0.1", port))
        buffer = bytearray()
        sequence = 0
        while time.monotonic() < deadline:
            sequence += 1
            key = f"{tag}-{number}-{sequence}".encode()
            sock.sendall(head + key + b"\r\n\r\n" + body)
            if _recv_response(sock, buffer) == 202:
                ok += 1
            else:
                errors += 1
        sock.close()
        counts.append((ok, errors))

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    out.put((sum(c[0] for c in counts), sum(c[1] for c in counts)))


def http_rate(
    port: int, token: str, body: bytes, batch: int, processes: int, threads: int, seconds: float
) -> dict[str, float]:
    queue: Any = multiprocessing.Queue()
    tag = f"b{batch}-{time.monotonic_ns()}"
    procs = [
        multiprocessing.Process(
            target=_client_process,
            args=(port, token, body, threads, seconds, f"{tag}-{i}", queue),
        )
        for i in range(processes)
    ]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - started
    ok = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    return {
        "requests_per_s": ok / elapsed,
        "reports_per_s": ok * batch / elapsed,
        "errors": errors,
        "elapsed": elapsed,
    }


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (Linux /proc)."""
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as children:
                for child in children.read().split():
                    found += process_tree(int(child))
        except OSError:  # a thread or process that just exited
            pass
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by `pids` (Linux /proc)."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def make_body(config: CampaignConfig, config_id: str, batch: int, seed: int = 1) -> bytes:
    oracle = config.build_oracle()
    values = np.random.default_rng(seed).integers(0, config.domain_size, batch)
    reports = oracle.encode(oracle.perturb_batch(values, np.random.default_rng(seed + 1)))
    body = {"campaign": config.name, "config_id": config_id, "reports": reports}
    return json.dumps(body, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--oracle", default="oue")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--client-threads", type=int, default=8)
    parser.add_argument("--raw-n", type=int, default=200_000)
    parser.add_argument("--batches", default="1,100,1000")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": args.oracle, "epsilon": 1.0,
         "domain": [f"v{i}" for i in range(args.d)]}
    )  # fmt: skip
    oracle = config.build_oracle()
    one = oracle.pack(oracle.perturb_batch(np.zeros(1, np.int64), np.random.default_rng(0)))
    with RedisServer(appendonly=True) as server:
        raw = raw_xadd_rate(server.url, one, args.raw_n)
        print(f"raw redis-py pipelined XADD (one entry per report): {raw:,.0f} reports/s")
        port = free_port()
        env = {**os.environ, "LDPTEL_ADMIN_TOKEN": ADMIN}
        collector = subprocess.Popen(
            [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
             "--redis-url", server.url, "--workers", str(args.workers),
             "--rate-limit", "0"],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    if requests.get(f"{url}/readyz", timeout=2).ok:
                        break
                except requests.RequestException:
                    time.sleep(0.1)
            admin = {"Authorization": f"Bearer {ADMIN}"}
            created = requests.post(f"{url}/v1/campaigns", json=config.to_dict(), headers=admin)
            config_id = created.json()["config_id"]
            token = requests.post(f"{url}/v1/tokens", json={"app": "bench"}, headers=admin)
            token_value = token.json()["token"]
            store = redis.Redis.from_url(server.url)
            stream = keys.stream(config.name, 0)
            for batch in (int(b) for b in args.batches.split(",")):
                body = make_body(config, config_id, batch)
                http_rate(port, token_value, body, batch, 1, 2, 1.0)  # warm up
                before = store.xlen(stream)
                server_pids = [*process_tree(collector.pid), server.process.pid]  # type: ignore[union-attr]
                cpu_before = cpu_seconds(server_pids)
                result = http_rate(
                    port, token_value, body, batch,
                    args.client_processes, args.client_threads, args.seconds,
                )  # fmt: skip
                server_cpu = cpu_seconds(server_pids) - cpu_before
                stored = store.xlen(stream) - before
                accepted = round(result["requests_per_s"] * result["elapsed"])
                assert stored == accepted, (stored, accepted)  # every 202 is one stored entry
                print(
                    f"batch {batch:>5}: {result['requests_per_s']:>9,.0f} requests/s "
                    f"{result['reports_per_s']:>11,.0f} reports/s "
                    f"({result['reports_per_s'] / raw:.2f}x raw XADD), "
                    f"errors {result['errors']:.0f}, server CPU "
                    f"{server_cpu / max(accepted, 1) * 1e6:.0f} us/request "
                    f"(gunicorn workers + redis-server)"
                )
        finally:
            collector.terminate()
            collector.wait(timeout=60)
    print(f"load average after: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
