"""The collector as a user runs it: `ldptel collector serve` (gunicorn, gevent workers) in a
subprocess on loopback, its stderr kept in a file the tests read; and raw-socket helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from collector_api import ADMIN_TOKEN, Api, wait_until_up
from waiting import scaled

from ldptel.store.redis_server import free_port


@dataclass
class Served:
    """A running `ldptel collector serve`: its URL, process and stderr file."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    clients: list[Api] = field(default_factory=list)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_pids(self) -> list[int]:
        """gunicorn's workers: the children of the serve process."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def api(self) -> Api:
        """A client whose keep-alive connection is closed before the stop (an open one
        would hold a worker's graceful stop for the keep-alive timeout)."""
        client = Api(self.url)
        self.clients.append(client)
        return client


def app_loaded(tmpdir: Path, pid: int) -> bool:
    """Whether worker `pid` of a collector started with TMPDIR=`tmpdir` has loaded the app:
    its prometheus_client files exist (made when the app's metrics module is imported). A
    collector's own TMPDIR, not /tmp: a metrics directory left by one killed earlier could
    hold the file of a recycled pid, which made a loaded worker of this one."""
    return any(tmpdir.glob(f"ldptel-metrics-*/counter_{pid}.db"))


def private_tmpdir(directory: Path) -> dict[str, str]:
    """The environment giving a collector its own TMPDIR under `directory` (see app_loaded)."""
    tmpdir = directory / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmpdir)}


@contextmanager
def served(
    redis_url: str,
    tmp_path: Path,
    *,
    workers: int = 2,
    body_timeout: float = 10.0,
    port: int | None = None,
    rate_limit: int = 0,
    rate_limit_seconds: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[Served]:
    """`ldptel collector serve` on loopback (a free port unless given), without a rate limit
    or refusal delay unless given, with `env` added to its environment; stopped (SIGTERM,
    then SIGKILL after 30 s) on exit, unless it is gone already."""
    port = port or free_port()
    log_path = tmp_path / f"collector-{port}.log"
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": ADMIN_TOKEN,
           "LDPTEL_RATE_LIMIT_SECONDS": str(rate_limit_seconds),
           "LDPTEL_REFUSAL_DELAY_SECONDS": "0",  # refusals at once, unless a test says
           **(env or {})}  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
             "--redis-url", redis_url, "--workers", str(workers), "--rate-limit", str(rate_limit),
             "--body-timeout", str(body_timeout)],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    running = Served(url, port, process, log_path)
    try:
        wait_until_up(url, process)
        yield running
    finally:
        for client in running.clients:
            client.session.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def unread_by_server(server_port: int, client: socket.socket) -> int | None:
    """Bytes the server side of `client`'s connection has received but its process not yet
    read (Linux /proc/net/tcp rx_queue); None while no such connection is established."""
    client_port = client.getsockname()[1]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if (
            int(local.split(":")[1], 16) == server_port
            and int(remote.split(":")[1], 16) == client_port
            and state == "01"  # ESTABLISHED
        ):
            return int(fields[4].split(":")[1], 16)
    return None


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def read_until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection; raises if it is still
    open at `deadline` (time.monotonic())."""
    received = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"still open at the deadline; received {received[:200]!r}")
        sock.settimeout(left)
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not part:
            return received
        received += part


def exchange(port: int, data: bytes, wait: float = 10.0) -> bytes:
    """Send raw bytes, then read the answer until the server closes the connection."""
    with connect(port) as sock:
        sock.sendall(data)
        return read_until_closed(sock, time.monotonic() + wait)


def status_and_json(raw: bytes) -> tuple[int, dict[str, object]]:
    """The status and the JSON body of a raw HTTP/1.1 answer with a Content-Length."""
    import json

    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in lines[1:])
    assert headers.get(b"Content-Type", b"").startswith(b"application/json"), head
    return int(lines[0].split()[1]), json.loads(body[: int(headers[b"Content-Length"])])
