"""`ldptel aggregator run`: drain the report streams into window state and rebuild reports,
once (cron, a Kubernetes CronJob) or every interval until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    from ldptel.aggregator.report import ReportOptions
    from ldptel.store.connection import RedisClient

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '5m', '1h' or '1d'."""
    text = text.strip().lower()
    scale = _UNITS.get(text[-1:], 1) if text else 1
    number = text[:-1] if text[-1:] in _UNITS else text
    try:
        seconds = float(number) * scale
    except ValueError:
        raise ParameterError("every", f"must be a duration (30s, 5m, 1h), got {text!r}") from None
    if seconds <= 0:
        raise ParameterError("every", "must be > 0")
    return seconds


def add_redis_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url",
        default=None,
        help="Redis of the collector, redis+cluster://host:port[,host:port...] for a Redis "
        "Cluster (default: $LDPTEL_REDIS_URL, else the private Redis of a `ldptel collector "
        f"serve` in this directory (.ldptel/redis.url), else {DEFAULT_REDIS_URL})",
    )


def redis_url(url: str | None) -> str:
    """--redis-url, else $LDPTEL_REDIS_URL, else the URL a `ldptel collector serve` running in
    this directory wrote for the other commands, else DEFAULT_REDIS_URL."""
    import os

    from ldptel.collector.serve import DATA_DIR, REDIS_URL_FILE

    if url or os.environ.get("LDPTEL_REDIS_URL"):
        return url or os.environ["LDPTEL_REDIS_URL"]
    url_file = DATA_DIR / REDIS_URL_FILE
    return url_file.read_text().strip() if url_file.exists() else DEFAULT_REDIS_URL


def redis_client(url: str | None) -> RedisClient:
    from ldptel.cli.main import CliError
    from ldptel.store.connection import REDIS_ERRORS, connect

    try:
        return connect(redis_url(url))
    except REDIS_ERRORS as error:  # a cluster client connects at once
        raise CliError(f"Redis: {error}") from error


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of how reports are built (shared by `aggregator run` and `report`)."""
    from ldptel.aggregator.consistency import ALIASES, METHODS

    parser.add_argument(
        "--consistency",
        default="norm-sub",
        choices=[*METHODS, *ALIASES],
        help="post-processing of the estimates into consistent ones (default norm-sub)",
    )
    parser.add_argument(
        "--min-reports",
        type=int,
        default=100,
        metavar="N",
        help="below N reports a window says 'not enough reports' (default 100)",
    )


def report_options(args: argparse.Namespace) -> ReportOptions:
    from ldptel.aggregator.report import ReportOptions

    return ReportOptions(consistency=args.consistency, min_reports=args.min_reports)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help="aggregate the streams into window state and reports")
    add_redis_argument(run_parser)
    when = run_parser.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="one pass over all shards, then exit")
    when.add_argument(
        "--every", default="1m", metavar="DURATION", help="pass interval, e.g. 30s, 1h (default 1m)"
    )
    run_parser.add_argument(
        "--worker-id",
        help="stable id of this worker (default host-pid); a restarted worker with the same "
        "id takes back its shards without waiting for the lease to expire",
    )
    run_parser.add_argument(
        "--batch-entries",
        type=int,
        default=1000,
        metavar="N",
        help="stream entries read and applied per transaction (default 1000)",
    )
    run_parser.add_argument(
        "--lease-ms", type=int, default=30_000, metavar="MS", help="shard lease TTL (default 30000)"
    )
    run_parser.add_argument("--quiet", action="store_true", help="log warnings only")
    add_report_arguments(run_parser)


@contextmanager
def graceful_stop(stop: Callable[[], None]) -> Iterator[None]:
    """SIGTERM and SIGINT call `stop()` (the current transaction finishes) while inside."""

    def handler(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("ldptel.aggregator").info("signal %d: stopping after this step", signum)
        stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run(args: argparse.Namespace) -> int:
    from ldptel.aggregator.worker import Worker

    if args.batch_entries < 1:
        raise ParameterError("batch_entries", "must be >= 1")
    if args.lease_ms < 2_000:
        # A step (read + count + EXEC) must finish within the lease, or it can never commit.
        raise ParameterError("lease_ms", "must be >= 2000 (a step must finish within the lease)")
    every = None if args.once else parse_duration(args.every)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    worker = Worker(
        redis_client(args.redis_url),
        worker_id=args.worker_id,
        batch_entries=args.batch_entries,
        lease_ms=args.lease_ms,
        report_options=report_options(args),
    )
    with graceful_stop(worker.stop):
        if every is None:
            stats = worker.run_pass()
            print(
                f"aggregated {stats.reports:,} reports ({stats.entries:,} entries, "
                f"{stats.quarantined:,} quarantined) from {stats.shards} shards; "
                f"{stats.reports_built} window reports built"
            )
        else:
            worker.run_forever(every)
    return 0
