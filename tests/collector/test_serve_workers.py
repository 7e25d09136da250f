"""`ldptel collector serve` outlives its workers: a worker that leaves (a timeout, a
max-requests recycle, a SIGTERM of its own) is replaced, and the private Redis, its
redis.url and the multiprocess metrics stay with the arbiter (a forked worker unwinds through
the arbiter's frames; it must not run their cleanup)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from collector_api import wait_until_up
from served_collector import app_loaded, private_tmpdir
from waiting import scaled, wait_for

from ldptel.store.redis_server import free_port


def worker_pids(arbiter: int) -> set[int]:
    """The arbiter's Python children (its gunicorn workers; not its redis-server): read from
    the arbiter's own children list, not a scan of /proc (on a loaded machine a scan takes
    long enough for a new worker to load the app before it is seen)."""
    pids = set()
    for pid in Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # the process ended meanwhile
            continue
        if b"redis-server" not in command:
            pids.add(int(pid))
    return pids


def serve_two_workers(directory: Path, port: int) -> subprocess.Popen[bytes]:
    """`ldptel collector serve` with two workers in `directory` (its stderr piped: the log)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDPTEL_")}
    env["LDPTEL_ADMIN_TOKEN"] = "workers-admin-token-123456"
    env.update(private_tmpdir(directory))
    return subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
         "--workers", "2"],
        cwd=directory, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.slow
def test_a_worker_leaving_leaves_the_collector_and_its_redis_running(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = serve_two_workers(tmp_path, port)
    try:
        wait_until_up(url, process)
        wait_for(lambda: len(worker_pids(process.pid)) == 2, "two workers")
        first, *_ = sorted(worker_pids(process.pid))
        os.kill(first, signal.SIGTERM)
        wait_for(lambda: first not in worker_pids(process.pid)
                 and len(worker_pids(process.pid)) == 2, "a replacement worker")  # fmt: skip
        replaced = worker_pids(process.pid)
        wait_for(lambda: all(app_loaded(tmp_path / "tmp", pid) for pid in replaced),
                 "both workers loaded the app")  # fmt: skip
        for _ in range(10):  # whichever worker answers, Redis and metrics are there
            assert requests.get(f"{url}/readyz", timeout=5).status_code == 200
            assert requests.get(f"{url}/metrics", timeout=5).status_code == 200
        assert (tmp_path / ".ldptel" / "redis.url").exists()
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=scaled(60))
    log = stderr.decode()
    assert process.returncode == 0, log[-2000:]
    # Both workers stopped on their own (a worker killed at graceful_timeout logs no exit).
    for pid in replaced:
        assert f"Worker exiting (pid: {pid})" in log, log[-2000:]


@pytest.mark.slow
def test_a_sigterm_while_a_worker_boots_stops_it_without_the_graceful_timeout(
    tmp_path: Path,
) -> None:
    # The arbiter is stopped the moment a replacement worker exists, before it has loaded
    # (and usually before gunicorn installed its own SIGTERM handler): the worker still exits
    # on its own instead of being killed after graceful_timeout (30 s).
    port = free_port()
    process = serve_two_workers(tmp_path, port)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        wait_for(lambda: len(worker_pids(process.pid)) == 2, "two workers")
        before = worker_pids(process.pid)
        os.kill(min(before), signal.SIGKILL)
        # Polled without a pause: the replacement must be caught before it loads the app.
        booting = wait_for(lambda: worker_pids(process.pid) - before, "a replacement", interval=0)
        (booting_pid,) = booting
        loaded_before_stop = app_loaded(tmp_path / "tmp", booting_pid)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=scaled(60))
    log = stderr.decode()
    assert process.returncode == 0, log[-2000:]
    assert not loaded_before_stop
    assert f"Worker exiting (pid: {booting_pid})" in log, log[-2000:]
    assert f"Worker (pid:{booting_pid}) was sent SIGKILL" not in log, log[-2000:]


def test_a_stop_signal_caught_between_the_fork_and_the_worker_handler_is_not_lost() -> None:
    # gunicorn's own arbiter handler, as a worker inherits it through the fork: it queues the
    # signal in the worker's copy of the arbiter's queue, which init_process reads.
    import queue
    from types import MethodType, SimpleNamespace

    from gunicorn.arbiter import Arbiter

    from ldptel.collector.worker import stop_queued

    copy = SimpleNamespace(SIG_QUEUE=queue.SimpleQueue())
    inherited = MethodType(Arbiter.signal, copy)
    inherited(signal.SIGCHLD, None)
    assert not stop_queued(inherited)  # not a stop
    inherited(signal.SIGCHLD, None)
    inherited(signal.SIGTERM, None)
    assert stop_queued(inherited)
    assert copy.SIG_QUEUE.empty()
    assert not stop_queued(signal.SIG_DFL)  # no arbiter handler: nothing queued
