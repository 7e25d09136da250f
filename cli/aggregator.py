"""`ldptel aggregator run`: drain the report streams into window state and rebuild reports,
once (cron, a Kubernetes CronJob) or every interval until SIGTERM/SIGINT. `ldptel aggregator
prune`: delete the window state of old, reported windows (aggregator/retention.py)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from ldptel.cli.redis_option import add_redis_argument, redis_client
from ldptel.cli.report_arguments import add_report_arguments, report_options
from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    from ldptel.aggregator.alerts import AlertSettings
    from ldptel.aggregator.sinks import WindowSink
    from ldptel.aggregator.worker import PassStats, Worker

__all__ = ["add_redis_argument", "redis_client"]
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


def add_alert_arguments(parser: argparse.ArgumentParser, listing: bool = False) -> None:
    """The alert settings (aggregator/alerts.py; docs/operations.md, "Alerts"); with
    `listing`, also the `alerts` command's own options."""
    if listing:
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        add_redis_argument(parser)
    parser.add_argument(
        "--alert-alpha",
        default=os.environ.get("LDPTEL_ALERT_ALPHA", ""),
        metavar="RATE",
        help="false-alarm rate of each campaign's change and threshold tests per window "
        "(Holm across items; default $LDPTEL_ALERT_ALPHA, else 0.01)",
    )
    parser.add_argument(
        "--alert-thresholds",
        default=os.environ.get("LDPTEL_ALERT_THRESHOLDS", ""),
        metavar="RULES",
        help="CAMPAIGN:ITEM=VALUE,...: alarm when the item's share (a numeric campaign's "
        "item mean: its mean) is significantly above VALUE (default $LDPTEL_ALERT_THRESHOLDS)",
    )


def alert_settings(args: argparse.Namespace) -> AlertSettings:
    from ldptel.aggregator.alerts import AlertSettings

    return AlertSettings.parse(args.alert_alpha, args.alert_thresholds)


def add_prune_arguments(parser: argparse.ArgumentParser) -> None:
    """`aggregator prune`'s options."""
    parser.add_argument("campaign", help="campaign name")
    parser.add_argument(
        "--before",
        required=True,
        metavar="WHEN",
        help="windows starting before this: unix seconds or an ISO date/time (UTC)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted, delete nothing"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document: totals and every state"
    )
    add_redis_argument(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help="aggregate the streams into window state and reports")
    add_redis_argument(run_parser)
    when = run_parser.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="one pass over all shards, then exit")
    when.add_argument(
        "--every",
        default=os.environ.get("LDPTEL_AGGREGATOR_EVERY", "1m"),
        metavar="DURATION",
        help="pass interval, e.g. 30s, 1h (default $LDPTEL_AGGREGATOR_EVERY, else 1m)",
    )
    run_parser.add_argument(
        "--worker-id",
        default=os.environ.get("LDPTEL_AGGREGATOR_WORKER_ID") or None,
        help="stable id of this worker (default host-pid); a restarted worker with the same "
        "id takes back its shards without waiting for the lease to expire",
    )
    run_parser.add_argument(
        "--batch-entries",
        type=int,
        default=os.environ.get("LDPTEL_AGGREGATOR_BATCH_ENTRIES", "1000"),
        metavar="N",
        help="stream entries read and applied per transaction (default 1000)",
    )
    run_parser.add_argument(
        "--lease-ms",
        type=int,
        default=os.environ.get("LDPTEL_AGGREGATOR_LEASE_MS", "30000"),
        metavar="MS",
        help="shard lease TTL (default 30000)",
    )
    run_parser.add_argument(
        "--health-port",
        type=int,
        default=os.environ.get("LDPTEL_AGGREGATOR_HEALTH_PORT", "0"),
        metavar="PORT",
        help="with --every: serve /metrics, /healthz and /readyz on this port (default "
        "$LDPTEL_AGGREGATOR_HEALTH_PORT, else 0 = off)",
    )
    run_parser.add_argument(
        "--health-host",
        default=os.environ.get("LDPTEL_AGGREGATOR_HEALTH_HOST", "127.0.0.1"),
        metavar="HOST",
        help="address of the health server (default 127.0.0.1; 0.0.0.0 in a container)",
    )
    run_parser.add_argument(
        "--parquet-dir",
        default=os.environ.get("LDPTEL_AGGREGATOR_PARQUET_DIR") or None,
        metavar="DIR",
        help="also export every window report built as Parquet under DIR/<campaign>/"
        "window_unix=<start>/ (needs pyarrow; default $LDPTEL_AGGREGATOR_PARQUET_DIR, else off)",
    )
    run_parser.add_argument("--quiet", action="store_true", help="log warnings only")
    run_parser.add_argument(
        "--json", action="store_true", help="with --once: print the pass's totals as JSON"
    )
    add_report_arguments(run_parser)
    add_alert_arguments(run_parser)
    add_alert_arguments(sub.add_parser(
        "alerts",
        help="the alert tests of every campaign's latest complete window, as /metrics has them",
    ), listing=True)  # fmt: skip
    add_prune_arguments(sub.add_parser(
        "prune",
        help="delete the window state of old, reported windows (their stored reports stay)",
    ))  # fmt: skip
    from ldptel.cli.candidates import add_candidates_parser

    add_candidates_parser(sub)


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
    if args.action == "prune":
        return run_prune(args)
    if args.action == "alerts":
        return run_alerts(args)
    if args.action == "candidates":
        from ldptel.cli.candidates import run_candidates

        return run_candidates(args)
    from ldptel.aggregator.worker import Worker
    from ldptel.store import logs

    if args.batch_entries < 1:
        raise ParameterError("batch_entries", "must be >= 1")
    if args.lease_ms < 2_000:
        # A step (read + count + EXEC) must finish within the lease, or it can never commit.
        raise ParameterError("lease_ms", "must be >= 2000 (a step must finish within the lease)")
    if not 0 <= args.health_port < 65536:
        raise ParameterError("health_port", "must be a port number (0 = off)")
    if args.json and not args.once:
        raise ParameterError("json", "only with --once (a service logs JSON instead)")
    every = None if args.once else parse_duration(args.every)
    alerts = alert_settings(args)
    logs.configure("WARNING" if args.quiet else None)
    client = redis_client(args.redis_url)
    worker = Worker(
        client,
        worker_id=args.worker_id,
        batch_entries=args.batch_entries,
        lease_ms=args.lease_ms,
        report_options=report_options(args),
        exports=exports(args),
    )
    with graceful_stop(worker.stop):
        if every is None:
            stats = worker.run_pass()
            if args.json:
                print(json.dumps(pass_totals(stats)))
                return 0
            print(
                f"aggregated {stats.reports:,} reports ({stats.entries:,} entries, "
                f"{stats.quarantined:,} quarantined) from {stats.shards} shards; "
                f"{stats.reports_built} window reports built"
            )
        elif args.health_port:
            _run_observed(worker, every, args.health_host, args.health_port, alerts)
        else:
            worker.run_forever(every)
    return 0


def exports(args: argparse.Namespace) -> list[WindowSink]:
    """The sinks after the store that the options ask for (aggregator/sinks/)."""
    if args.parquet_dir is None:
        return []
    from ldptel.aggregator.parquet_export import ParquetUnavailableError
    from ldptel.aggregator.sinks import ParquetSink

    try:
        return [ParquetSink(args.parquet_dir)]
    except ParquetUnavailableError as error:
        raise ParameterError("parquet_dir", str(error)) from None


def pass_totals(stats: PassStats) -> dict[str, int]:
    """A pass's totals, for `run --once --json`."""
    names = ("reports", "entries", "quarantined", "shards", "skipped_shards", "reports_built",
             "export_failures", "exports_redelivered")  # fmt: skip
    return {name: getattr(stats, name) for name in names}


def _run_observed(
    worker: Worker, every: float, host: str, port: int, alerts: AlertSettings
) -> None:
    """`run_forever` with metrics and the health server; the loop counts as stalled when no
    step or pass ended for three intervals (at least a minute, the lease's order)."""
    from ldptel.aggregator.metrics import AggregatorMetrics, HealthServer
    from ldptel.cli.main import CliError

    metrics = AggregatorMetrics(stale_seconds=max(3 * every, 60.0), alerts=alerts)
    worker.metrics = metrics
    try:
        server = HealthServer(metrics, host, port)
    except OSError as error:
        raise CliError(f"health server on {host}:{port}: {error.strerror}") from error
    with server:
        worker.run_forever(every)


def run_alerts(args: argparse.Namespace) -> int:
    """`aggregator alerts`: what the alert gauges hold, per campaign and item."""
    import dataclasses
    import time

    from ldptel.aggregator.alerts import campaign_alerts
    from ldptel.store.registry import Registry
    from ldptel.store.reports import iso

    settings = alert_settings(args)
    client = redis_client(args.redis_url)
    now = time.time()
    found = [campaign_alerts(client, name, settings, now) for name in Registry(client).names()]
    campaigns = [alerts for alerts in found if alerts is not None]
    if args.json:
        print(json.dumps({"alpha": settings.alpha, "campaigns": [{
            "campaign": a.campaign, "window": iso(a.window), "window_unix": a.window,
            "previous_unix": a.previous, "items": [dataclasses.asdict(i) for i in a.items],
        } for a in campaigns]}))  # fmt: skip
        return 0
    if not campaigns:
        print("no campaign has a complete window with a report yet")
    for alerts in campaigns:
        fired = [i for i in alerts.items if i.changed or i.exceeded]
        print(f"{alerts.campaign}  window {iso(alerts.window)}: {len(alerts.items)} items, "
              f"{len(fired)} alerting at alpha {settings.alpha:g}")  # fmt: skip
        for item in fired:
            why = [
                w for w, on in (("changed", item.changed), ("above threshold", item.exceeded)) if on
            ]
            print(f"  {item.item}: {item.estimate:.4g} +- {item.stderr:.2g} ({', '.join(why)})")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    import time

    from ldptel.aggregator.retention import prune
    from ldptel.store.registry import Registry
    from ldptel.store.reports import iso, parse_window

    before = parse_window(args.before)
    client = redis_client(args.redis_url)
    registry = Registry(client)
    if registry.current_config(args.campaign) is None:
        raise ParameterError("campaign", f"unknown campaign {args.campaign!r}")
    outcomes = prune(client, registry, args.campaign, before, time.time(), args.dry_run)
    deleted = sum(outcome.deleted for outcome in outcomes)
    if args.json:
        states = [{
            "shard": outcome.shard, "window": iso(outcome.state.window),
            "window_unix": outcome.state.window, "config_id": outcome.state.config_id,
            "level": outcome.state.level, "deleted": outcome.deleted, "reason": outcome.reason,
        } for outcome in outcomes]  # fmt: skip
        print(json.dumps({
            "campaign": args.campaign, "before": iso(before), "dry_run": args.dry_run,
            "deleted": deleted, "states": states,
        }))  # fmt: skip
        return 0
    for outcome in outcomes:
        level = f" level {outcome.state.level}" if outcome.state.level else ""
        print(f"{iso(outcome.state.window)} shard {outcome.shard}{level}: {outcome.reason}")
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {deleted} of {len(outcomes)} window states before {iso(before)}")
    return 0
