"""The collector's front door under hostile load: normal clients' throughput and latency from
`ldptel collector serve` on a quiet machine, with 256 slow or idle connections open, and with
16 senders of gzip bombs (plus every worker's RSS, idle and peak); then a load ramp of 1, 4, 16
and 64 concurrent clients.

    .venv/bin/python benchmarks/collector_front_door.py [--seconds 5] [--json out.json]

Normal clients: 2 processes of keep-alive raw-socket HTTP/1.1 clients (threads) sending
pre-encoded batches of 100 OUE reports (d = 64) with a fresh Idempotency-Key each. The hostile
load runs in its own process and keeps its connections open: a slow connection sends headers
then a byte of body per second, an idle one sends nothing; either is reopened as soon as the
server drops it (body timeout, keep-alive timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import multiprocessing
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import requests
from collector_ingest import ADMIN, _recv_response, cpu_seconds, make_body

from ldptel.client.campaign import CampaignConfig
from ldptel.store.redis_server import RedisServer, free_port

SLOW = 256
BOMB_SENDERS = 16
INFLATED = 4 * 1024 * 1024


# -- normal clients ------------------------------------------------------------------------
def _clients(
    port: int, tokens: list[str], body: bytes, threads: int, seconds: float, tag: str, out: Any
) -> None:
    """`threads` clients; client i sends with tokens[i % len(tokens)]."""
    heads = [
        (
            "POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\nIdempotency-Key: "
        ).encode()
        for token in tokens
    ]
    latencies: list[float] = []
    failures = [0]
    deadline = time.monotonic() + seconds

    def client(number: int) -> None:
        head = heads[number % len(heads)]
        sock = socket.create_connection(("127.0.0.1", port))
        buffer = bytearray()
        sequence = 0
        while time.monotonic() < deadline:
            sequence += 1
            started = time.perf_counter()
            sock.sendall(head + f"{tag}-{number}-{sequence}".encode() + b"\r\n\r\n" + body)
            status = _recv_response(sock, buffer)
            if status == 202:
                latencies.append(time.perf_counter() - started)
            else:
                failures[0] += 1
        sock.close()

    pool = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    out.put((latencies, failures[0]))


def normal_load(
    port: int, token: str | list[str], body: bytes, clients: int, seconds: float, pids: list[int]
) -> dict[str, float]:
    """`clients` keep-alive clients over 2 processes for `seconds`: requests/s, p50, p99, and
    the workers' CPU per answered request (hostile requests included, if any). With a list of
    tokens, the clients take them in turn (as installs of several apps)."""
    tokens = [token] if isinstance(token, str) else token
    cpu_before = cpu_seconds(pids)
    queue: Any = multiprocessing.Queue()
    tag = f"n{time.monotonic_ns()}"
    split = [clients // 2 + clients % 2, clients // 2]
    procs = [
        multiprocessing.Process(
            target=_clients,
            args=(port, tokens[i::2] or tokens, body, n, seconds, f"{tag}-{i}", queue),
        )
        for i, n in enumerate(split)
        if n
    ]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - started
    latencies = np.array([x for r in results for x in r[0]])
    return {
        "clients": clients,
        "worker_cpu_ms_per_request": (cpu_seconds(pids) - cpu_before) / len(latencies) * 1000,
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p99_ms": float(np.percentile(latencies, 99) * 1000),
        "failures": sum(r[1] for r in results),
    }


# -- hostile load --------------------------------------------------------------------------
def _slow_connections(port: int, count: int, stop: Any, out: Any) -> None:
    """Keep `count` connections open (half sending a body a byte per second, half idle),
    reopening each one the server drops; report how many were dropped and how long each
    lived."""
    head = (
        b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer ldp_0123456789abcdef\r\nIdempotency-Key: slow\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    selector = selectors.DefaultSelector()
    lifetimes: list[float] = []

    def open_one(slow: bool) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        if slow:
            sock.sendall(head)
        selector.register(sock, selectors.EVENT_READ, (slow, time.monotonic()))

    for i in range(count):
        open_one(i % 2 == 0)
    next_byte = time.monotonic() + 1
    while not stop.is_set():
        for key, _ in selector.select(timeout=0.1):
            slow, opened = key.data
            try:
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            except OSError:
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                lifetimes.append(time.monotonic() - opened)
                open_one(slow)
        if time.monotonic() >= next_byte:
            next_byte += 1
            for key in list(selector.get_map().values()):
                if key.data[0]:
                    with contextlib.suppress(OSError):  # dropped: reopened on its EOF
                        key.fileobj.send(b" ")  # type: ignore[union-attr]
    open_now = len(selector.get_map())
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    out.put({"open": open_now, "dropped": len(lifetimes), "lifetimes": lifetimes})


def bombs(campaign: str, config_id: str) -> list[bytes]:
    """Two ~4 KiB gzip bodies that inflate to 4 MiB of `{}` reports: one names its campaign
    first (as the SDK does), one last."""
    reports = b"[" + b"{}," * ((INFLATED - 200) // 3) + b"{}]"
    head = b'"campaign":"%s","config_id":"%s"' % (campaign.encode(), config_id.encode())
    texts = (b'{%s,"reports":%s}' % (head, reports), b'{"reports":%s,%s}' % (reports, head))
    return [gzip.compress(text, compresslevel=9) for text in texts]


def _bombers(port: int, token: str, bodies: list[bytes], senders: int, stop: Any, out: Any) -> None:
    """`senders` keep-alive raw-socket clients posting bombs back to back (raw sockets: the
    load generator shares the 2 cores, so it must spend little CPU per request)."""
    head = (
        "POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Encoding: gzip\r\nIdempotency-Key: "
    ).encode()
    counts: dict[int, int] = {}
    lock = threading.Lock()
    tag = os.urandom(4).hex()  # fresh keys in every run: no batch is a retry

    def sender(number: int) -> None:
        sequence = 0
        while not stop.is_set():
            sock = socket.create_connection(("127.0.0.1", port))
            buffer = bytearray()
            try:
                while not stop.is_set():
                    sequence += 1
                    body = bodies[sequence % len(bodies)]
                    length = f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                    sock.sendall(head + f"{tag}-{number}-{sequence}".encode() + length + body)
                    status = _recv_response(sock, buffer)
                    with lock:
                        counts[status] = counts.get(status, 0) + 1
            except ConnectionError:
                pass  # closed by the server after its answer: reconnect
            finally:
                sock.close()

    pool = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    out.put(counts)


# -- measurement ---------------------------------------------------------------------------
def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def workers_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(child) for child in children.read().split()]


def with_hostile(target: Any, args: tuple[Any, ...], measure: Any) -> tuple[Any, Any]:
    """Run `target(*args, stop, out)` in a process while `measure()` runs; returns both
    results."""
    stop: Any = multiprocessing.Event()
    out: Any = multiprocessing.Queue()
    proc = multiprocessing.Process(target=target, args=(*args, stop, out))
    proc.start()
    time.sleep(2)  # benchmark only: let the hostile connections open
    measured = measure()
    stop.set()
    hostile = out.get()
    proc.join()
    return measured, hostile


def hostile_cost(
    pids: list[int], port: int, token: str, bodies: list[bytes], seconds: float
) -> dict[str, float]:
    """16 back-to-back senders of `bodies` alone: answers/s and worker CPU per answer."""
    before = cpu_seconds(pids)
    stop: Any = multiprocessing.Event()
    out: Any = multiprocessing.Queue()
    proc = multiprocessing.Process(
        target=_bombers, args=(port, token, bodies, BOMB_SENDERS, stop, out)
    )
    started = time.perf_counter()
    proc.start()
    time.sleep(seconds)  # benchmark only: a fixed measurement period
    stop.set()
    counts = out.get()
    proc.join()
    elapsed = time.perf_counter() - started
    answers = sum(counts.values())
    return {
        "answers_per_s": answers / elapsed,
        "worker_cpu_ms_per_answer": (cpu_seconds(pids) - before) / answers * 1000,
        **{f"status_{status}": n for status, n in counts.items()},
    }


@contextlib.contextmanager
def serving(
    redis_url: str, rate_limit: int = 0, refusal_delay: float = 0.0
) -> Iterator[tuple[int, Any]]:
    """`ldptel collector serve` (2 workers, `rate_limit` requests per token and second, 0 =
    off; refusals answered `refusal_delay` s late, 0 = at once, as these benchmarks were first
    measured) on a free port; yields (port, process) once it is ready, stops it afterwards."""
    port = free_port()
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": ADMIN,
           "LDPTEL_REFUSAL_DELAY_SECONDS": str(refusal_delay)}  # fmt: skip
    collector = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
         "--redis-url", redis_url, "--workers", "2", "--rate-limit", str(rate_limit)],
        env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        yield port, collector
    finally:
        collector.terminate()
        collector.wait(timeout=60)


def admin_post(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """An admin call (create a campaign or a token); its JSON answer."""
    answer = requests.post(f"http://127.0.0.1:{port}{path}", json=body,
                           headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)  # fmt: skip
    result: dict[str, Any] = answer.json()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": "oue", "epsilon": 1.0, "domain": [f"v{i}" for i in range(64)]}
    )
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with RedisServer(appendonly=True) as server, serving(server.url) as (port, collector):
        config_id = admin_post(port, "/v1/campaigns", config.to_dict())["config_id"]
        token = admin_post(port, "/v1/tokens", {"app": "bench"})["token"]
        body = make_body(config, config_id, 100)
        seconds = args.seconds
        pids = workers_of(collector.pid)
        normal_load(port, token, body, 16, 1.0, pids)  # warm-up: every worker has loaded
        idle = {pid: rss(pid) for pid in pids}
        # Quiet and slow runs alternate (3 each): other jobs on the machine change its
        # speed from one minute to the next.
        results["quiet"], results["slow"], results["slow_connections"] = [], [], []
        for _ in range(3):
            results["quiet"].append(normal_load(port, token, body, 16, seconds, pids))
            slow, connections = with_hostile(
                _slow_connections, (port, SLOW),
                lambda: normal_load(port, token, body, 16, seconds, pids),
            )  # fmt: skip
            lifetimes = connections.pop("lifetimes")
            connections["lived_max_s"] = max(lifetimes, default=0.0)
            results["slow"].append(slow)
            results["slow_connections"].append(connections)
        peaks = dict(idle)
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.02):
                for pid in peaks:
                    peaks[pid] = max(peaks[pid], rss(pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        results["bombs"], results["bomb_answers"] = with_hostile(
            _bombers, (port, token, bombs("bench", config_id), BOMB_SENDERS),
            lambda: normal_load(port, token, body, 16, seconds, pids),
        )  # fmt: skip
        sampling.set()
        sampler.join()
        results["rss_mib"] = {
            str(pid): {"idle": idle[pid] / 2**20, "peak": peaks[pid] / 2**20} for pid in idle
        }
        valid = [gzip.compress(body)]
        results["cost_valid"] = hostile_cost(pids, port, token, valid, seconds)
        results["cost_bombs"] = hostile_cost(pids, port, token, bombs("bench", config_id), seconds)
        results["flood"], results["flood_answers"] = with_hostile(
            _bombers, (port, token, valid, BOMB_SENDERS),
            lambda: normal_load(port, token, body, 16, seconds, pids),
        )  # fmt: skip
        results["ramp"] = [normal_load(port, token, body, n, seconds, pids) for n in (1, 4, 16, 64)]
    results["load_average_after"] = os.getloadavg()
    quiet = float(np.median([run["requests_per_s"] for run in results["quiet"]]))
    results["slow_ratios"] = [
        s["requests_per_s"] / q["requests_per_s"]
        for q, s in zip(results["quiet"], results["slow"], strict=True)
    ]
    results["slow_ratio"] = float(np.median([s["requests_per_s"] for s in results["slow"]])) / quiet
    results["bomb_ratio"] = results["bombs"]["requests_per_s"] / quiet
    results["flood_ratio"] = results["flood"]["requests_per_s"] / quiet
    emit(results, args.json)


def emit(results: dict[str, Any], path: str | None) -> None:
    """The results as JSON on stdout, and in `path` if given."""
    print(json.dumps(results, indent=2))
    if path:
        with open(path, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
