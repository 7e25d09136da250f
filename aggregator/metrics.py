"""Observability of `ldptel aggregator run --every`: Prometheus metrics and the health
endpoints the probes call, served by a small HTTP server thread inside the worker process.

    GET /metrics  Prometheus text (the metrics below, and the alert gauges of
                  aggregator/alerts.py: EstimateGauges)
    GET /healthz  200 while the loop makes progress (a step or a pass ended within
                  `stale_seconds`), else 503: the liveness probe
    GET /readyz   200 once a pass succeeded and none failed since, else 503 (Redis down):
                  the readiness probe
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from ldptel.aggregator.alerts import AlertSettings, CampaignAlerts, campaign_alerts
from ldptel.aggregator.shard import stream_entries
from ldptel.store import keys
from ldptel.store.connection import RedisClient, text
from ldptel.store.registry import Registry


class PassTotals(Protocol):
    """What the metrics count of a pass (ldptel.aggregator.worker.PassStats)."""

    entries: int
    reports: int
    quarantined: int


log = logging.getLogger("ldptel.aggregator")
#: Upper end of a stream id's sequence number (Redis ids are two unsigned 64-bit numbers).
MAX_SEQ = 2**64 - 1


def unapplied_entries(client: RedisClient, name: str, shard: int) -> int:
    """Entries of a shard's stream after its checkpoint, exactly, in two reads per window.

    The ingest script numbers the entries of one id millisecond consecutively (`<ms>-0`,
    `<ms>-1`, ...; collector/ingest.py), and trimming never passes the checkpoint, so each
    millisecond group after the checkpoint holds last seq - first seq + 1 entries."""
    stream = keys.stream(name, shard)
    checkpoint = client.get(keys.checkpoint(name, shard))
    start = "(" + text(checkpoint) if checkpoint is not None else "-"
    total = 0
    while first := stream_entries(client.xrange(stream, min=start, max="+", count=1)):
        ms, first_seq = (int(part) for part in text(first[0][0]).split("-"))
        last = client.xrevrange(stream, max=f"{ms}-{MAX_SEQ}", min=f"{ms}-0", count=1)
        [(last_id, _)] = stream_entries(last)
        total += int(text(last_id).split("-")[1]) - first_seq + 1
        start = f"({ms}-{MAX_SEQ}"
    return total


@dataclass
class AggregatorMetrics:
    """The worker's metrics, in a registry of their own (one worker per process)."""

    stale_seconds: float
    alerts: AlertSettings = field(default_factory=AlertSettings)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    started: float = field(default_factory=time.time)
    last_progress: float = field(default_factory=time.monotonic)
    ready: bool = False

    def __post_init__(self) -> None:
        r = self.registry
        self.pass_seconds = Histogram(
            "ldptel_aggregator_pass_seconds",
            "Duration of a pass over all shards (draining, then building reports).",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900),
            registry=r,
        )
        self.passes_failed = Counter(
            "ldptel_aggregator_passes_failed", "Passes that Redis failed (retried).", registry=r
        )
        self.entries = Counter(
            "ldptel_aggregator_entries_applied", "Stream entries applied.", registry=r
        )
        self.reports = Counter(
            "ldptel_aggregator_reports_applied", "Reports applied (in those entries).", registry=r
        )
        self.quarantined = Counter(
            "ldptel_aggregator_entries_quarantined",
            "Stream entries set aside as undecodable (counted in no estimate).",
            registry=r,
        )
        self.lag = Gauge(
            "ldptel_aggregator_lag_entries",
            "Stream entries not yet applied, per campaign shard, after the last pass.",
            ["campaign", "shard"],
            registry=r,
        )
        self.export_failures = Counter(
            "ldptel_aggregator_export_failures",
            "Window documents an export (a sink after the store) failed to write; each stays "
            "owed and is retried on the next pass.",
            ["sink"],
            registry=r,
        )
        self.last_success = Gauge(
            "ldptel_aggregator_last_success_timestamp_seconds",
            "Unix time at which the last successful pass ended.",
            registry=r,
        )
        self.estimates = EstimateGauges(r)
        self.estimates.alpha.set(self.alerts.alpha)

    def progress(self) -> None:
        """A step or pass ended: the loop is alive."""
        self.last_progress = time.monotonic()

    def passed(self, seconds: float, stats: PassTotals) -> None:
        self.pass_seconds.observe(seconds)
        self.entries.inc(stats.entries)
        self.reports.inc(stats.reports)
        self.quarantined.inc(stats.quarantined)
        self.last_success.set(time.time())
        self.ready = True
        self.progress()

    def export_failed(self, sink: str) -> None:
        self.export_failures.labels(sink).inc()

    def failed(self) -> None:
        self.passes_failed.inc()
        self.ready = False
        self.progress()

    def measure_lag(self, client: RedisClient, registry: Registry) -> None:
        """Set the lag gauge of every shard of every campaign."""
        for name in registry.names():
            for shard in range(registry.shard_count(name)):
                self.lag.labels(name, str(shard)).set(unapplied_entries(client, name, shard))

    def measure_alerts(self, client: RedisClient, registry: Registry) -> None:
        """Set the estimate and alert gauges from every campaign's latest complete window."""
        now = time.time()
        found = [campaign_alerts(client, name, self.alerts, now) for name in registry.names()]
        self.estimates.set([alerts for alerts in found if alerts is not None])

    def alive(self) -> bool:
        return time.monotonic() - self.last_progress <= self.stale_seconds


class EstimateGauges:
    """The alert gauges (aggregator/alerts.py): per campaign and item of its latest complete
    window, the estimate, its stderr, the change test and the threshold test."""

    def __init__(self, r: CollectorRegistry) -> None:
        item = ["campaign", "item"]
        self.alpha = Gauge(
            "ldptel_alert_alpha",
            "Stated false-alarm rate of each test family (a campaign's items, one window).",
            registry=r,
        )
        self.window = Gauge(
            "ldptel_alert_window_start_seconds",
            "Start (unix seconds) of the latest complete window with a report.",
            ["campaign"],
            registry=r,
        )
        self.previous = Gauge(
            "ldptel_alert_previous_window_start_seconds",
            "Start of the window the change is measured from.",
            ["campaign"],
            registry=r,
        )
        self.estimate = Gauge(
            "ldptel_estimate",
            "Estimated share of the window's reports holding the item (a numeric "
            'campaign: its mean, item "mean").',
            item,
            registry=r,
        )
        self.stderr = Gauge("ldptel_estimate_stderr", "Standard error of ldptel_estimate.", item,
                            registry=r)  # fmt: skip
        self.change_z = Gauge(
            "ldptel_estimate_change_z",
            "Change from the previous window's estimate, in standard errors of the difference.",
            item,
            registry=r,
        )
        self.changed = Gauge(
            "ldptel_estimate_change_significant",
            "1 if the change is significant at ldptel_alert_alpha (two-sided z, Holm).",
            item,
            registry=r,
        )
        self.threshold = Gauge("ldptel_estimate_threshold", "The configured alert threshold.",
                               item, registry=r)  # fmt: skip
        self.exceeded = Gauge(
            "ldptel_estimate_threshold_exceeded",
            "1 if the estimate is significantly above its threshold (one-sided z, Holm).",
            item,
            registry=r,
        )

    def set(self, campaigns: list[CampaignAlerts]) -> None:
        """Replace every series with those of `campaigns` (items and campaigns that are
        gone disappear)."""
        per_item = (self.estimate, self.stderr, self.change_z, self.changed, self.threshold,
                    self.exceeded)  # fmt: skip
        for gauge in (self.window, self.previous, *per_item):
            gauge.clear()
        for alerts in campaigns:
            self.window.labels(alerts.campaign).set(alerts.window)
            if alerts.previous is not None:
                self.previous.labels(alerts.campaign).set(alerts.previous)
            for item in alerts.items:
                labels = (alerts.campaign, item.item)
                self.estimate.labels(*labels).set(item.estimate)
                self.stderr.labels(*labels).set(item.stderr)
                if item.change_z is not None:
                    self.change_z.labels(*labels).set(item.change_z)
                    self.changed.labels(*labels).set(item.changed)
                if item.threshold is not None:
                    self.threshold.labels(*labels).set(item.threshold)
                    self.exceeded.labels(*labels).set(item.exceeded)


class HealthServer:
    """/metrics, /healthz and /readyz of one worker on (host, port), in a daemon thread."""

    def __init__(self, metrics: AggregatorMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.server = ThreadingHTTPServer((host, port), _handler(metrics))
        self.server.daemon_threads = True
        # shutdown() waits for serve_forever to next look at its flag: every 0.5 s by default.
        self.thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="ldptel-aggregator-health",
            daemon=True,
        )

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> HealthServer:
        self.thread.start()
        log.info("aggregator health and metrics listening on %s", self.address)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(metrics: AggregatorMetrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._status(metrics.alive(), "loop stalled")
            elif self.path == "/readyz":
                self._status(metrics.ready, "no successful pass yet, or the last one failed")
            else:
                self._send(404, b'{"error": {"field": "path", "reason": "not found"}}')

        def _status(self, ok: bool, reason: str) -> None:
            body = {"status": "ok"} if ok else {"status": "unavailable", "reason": reason}
            self._send(200 if ok else 503, json.dumps(body).encode())

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """No access log: probes every few seconds would drown the worker's lines."""

    return Handler
