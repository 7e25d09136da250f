"""`ldptel collector serve`: the app under gunicorn (gevent workers, collector/worker.py), with
a private redis-server when no Redis URL is given.

SIGTERM is a graceful stop: gunicorn stops accepting, lets workers finish in-flight requests
(up to `graceful_timeout`), then the private Redis is stopped (it flushes its AOF).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from ldptel.collector.settings import CollectorConfig
from ldptel.collector.worker import BodyLimits
from ldptel.store import logs
from ldptel.store.redis_server import DATA_DIR, REDIS_URL_FILE

log = logging.getLogger("ldptel.collector")


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


def _when_ready(server: Any) -> None:
    log.info("collector listening on %s", ", ".join(f"http://{a}" for a in server.cfg.bind))


def _child_exit(server: Any, worker: Any) -> None:
    # A dead worker's metric files must stop counting as live gauges (prometheus_client).
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


class GeventApplication(BaseApplication):  # type: ignore[misc]
    """gunicorn with its settings from code, on CollectorWorker (gevent: an idle or slow
    connection costs a greenlet; bounded waits; JSON errors; no client addresses logged).
    Each worker builds its own app with `load` after the fork (its own Redis pool). The
    collector runs on it, and `ldptel dashboard` too, with the same timeouts."""

    def __init__(
        self,
        load: Callable[[], Any],
        options: ServeOptions,
        body_limits: BodyLimits,
        *,
        name: str,
        settings: Mapping[str, object],
    ) -> None:
        self.loader = load
        self.serve_options = options
        self.body_limits = body_limits  # read by CollectorWorker.init_process
        self.name = name
        self.extra_settings = settings
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
            "logger_class": "ldptel.collector.worker.GunicornLogger",
            "errorlog": "-",
            "loglevel": "warning",
            "logconfig_dict": logs.gunicorn_logconfig(),  # JSON lines, as the app's
            "proc_name": self.name,
            **self.extra_settings,  # hooks and the app's own
        }
        for key, value in settings.items():
            self.cfg.set(key, value)
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25: no admin socket
            self.cfg.set("control_socket_disable", True)  # in $HOME (read-only in containers)
        # $GUNICORN_CMD_ARGS last, as gunicorn's own command does: it overrides the above.
        env_args = self.cfg.parser().parse_args(self.cfg.get_cmd_args_from_env())
        for key, value in vars(env_args).items():
            if value is not None and key != "args":
                self.cfg.set(key.lower(), value)

    def load(self) -> Any:
        return self.loader()


def collector_application(config: CollectorConfig, options: ServeOptions) -> GeventApplication:
    def load() -> Any:
        from ldptel.collector.app import create_app

        return create_app(config)

    limits = BodyLimits(config.body_timeout_seconds, config.max_body_bytes)
    hooks = {"when_ready": _when_ready, "child_exit": _child_exit}
    return GeventApplication(load, options, limits, name="ldptel-collector", settings=hooks)


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
            log.info("private Redis at %s", url)
            return _run(replace(config, redis_url=url), options)


def _run(config: CollectorConfig, options: ServeOptions) -> int:
    return run_application(collector_application(config, options))


def run_application(application: GeventApplication) -> int:
    """Run gunicorn until stopped; returns its exit status."""
    arbiter = os.getpid()
    try:
        application.run()
    except SystemExit as stop:  # gunicorn's arbiter exits through sys.exit
        if os.getpid() != arbiter:
            # A forked worker leaving (stop, timeout, max-requests) unwinds through this frame
            # too: it must not run the arbiter's cleanup (stop the private Redis, delete the
            # metrics directory) under the workers that stay.
            os._exit(int(stop.code or 0))
        return int(stop.code or 0)
    return 0
