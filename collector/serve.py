"""`ldptel collector serve`: the app under gunicorn (gevent workers, collector/worker.py), with
a private redis-server when no Redis URL is given.

SIGTERM is a graceful stop: gunicorn stops accepting, lets workers finish in-flight requests
(up to `graceful_timeout`), then the private Redis is stopped (it flushes its AOF).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from ldptel.collector.settings import CollectorConfig

#: Where `serve` keeps the private Redis (and tells other commands its URL).
DATA_DIR = Path(".ldptel")
REDIS_URL_FILE = "redis.url"


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
    #: Open connections per worker (slow and idle ones included); past it, new ones wait in
    #: the listen backlog.
    connections: int = 1000
    graceful_timeout: int = 30
    data_dir: Path = DATA_DIR


def _child_exit(server: Any, worker: Any) -> None:
    # A dead worker's metric files must stop counting as live gauges (prometheus_client).
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


class CollectorApplication(BaseApplication):  # type: ignore[misc]
    """gunicorn with its settings from code; each worker builds its own app (and Redis
    connection pool) after the fork."""

    def __init__(self, config: CollectorConfig, options: ServeOptions) -> None:
        self.collector_config = config
        self.serve_options = options
        super().__init__()

    def load_config(self) -> None:
        options = self.serve_options
        settings = {
            "bind": f"{options.host}:{options.port}",
            "workers": options.workers,
            "worker_class": "ldptel.collector.worker.CollectorWorker",
            "worker_connections": options.connections,
            "graceful_timeout": options.graceful_timeout,
            "timeout": 60,
            "keepalive": 5,
            "accesslog": None,  # the app writes its own JSON line, without client addresses
            "errorlog": "-",
            "loglevel": "warning",
            "child_exit": _child_exit,
            "proc_name": "ldptel-collector",
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from ldptel.collector.app import create_app

        return create_app(self.collector_config)


@contextmanager
def private_redis(data_dir: Path) -> Iterator[str]:
    """A redis-server with its AOF in `data_dir`/redis; its URL is written to
    `data_dir`/redis.url for the other `ldptel` commands while it runs."""
    from ldptel.store.redis_server import RedisServer

    server = RedisServer(data_dir / "redis", appendonly=True).start()
    url_file = data_dir / REDIS_URL_FILE
    url_file.write_text(server.url + "\n")
    try:
        yield server.url
    finally:
        url_file.unlink(missing_ok=True)
        server.stop()


@contextmanager
def multiprocess_metrics() -> Iterator[None]:
    """A fresh PROMETHEUS_MULTIPROC_DIR, set before any worker imports prometheus_client."""
    path = tempfile.mkdtemp(prefix="ldptel-metrics-")
    previous = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        else:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = previous
        shutil.rmtree(path, ignore_errors=True)


def serve(config: CollectorConfig, options: ServeOptions, *, redis_url: str | None) -> int:
    """Run until stopped; returns gunicorn's exit status."""
    with multiprocess_metrics():
        if redis_url is not None:
            return _run(replace(config, redis_url=redis_url), options)
        options.data_dir.mkdir(parents=True, exist_ok=True)
        with private_redis(options.data_dir) as url:
            print(f"ldptel collector: private Redis at {url}", file=sys.stderr)
            return _run(replace(config, redis_url=url), options)


def _run(config: CollectorConfig, options: ServeOptions) -> int:
    try:
        CollectorApplication(config, options).run()
    except SystemExit as stop:  # gunicorn's arbiter exits through sys.exit
        return int(stop.code or 0)
    return 0
