"""Prometheus metrics of the collector.

Under `ldptel collector serve` (gunicorn, several worker processes) PROMETHEUS_MULTIPROC_DIR
is set before any worker imports prometheus_client, and /metrics aggregates all workers.
Without it (an app embedded in another server, the tests) each process reports its own.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

REPORTS_ACCEPTED = Counter(
    "ldptel_collector_reports_accepted", "Reports stored (a retried batch counts once)."
)
REPORTS_REJECTED = Counter(
    "ldptel_collector_reports_rejected",
    "Reports in batches that were rejected, by reason.",
    ["reason"],
)
REQUESTS_REJECTED = Counter(
    "ldptel_collector_requests_rejected", "Requests answered with an error, by reason.", ["reason"]
)
DUPLICATE_BATCHES = Counter(
    "ldptel_collector_duplicate_batches", "Retried batches recognized by their idempotency key."
)
BATCH_SIZE = Histogram(
    "ldptel_collector_batch_size",
    "Reports per accepted batch.",
    buckets=(1, 10, 100, 1_000, 10_000),
)
REQUEST_SECONDS = Histogram(
    "ldptel_collector_request_seconds",
    "Request latency in the app, by endpoint.",
    ["endpoint"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
)
REDIS_ERRORS = Counter(
    "ldptel_collector_redis_errors", "Requests that failed because Redis was unavailable."
)


_REQUEST_SECONDS_BY_ENDPOINT: dict[str, Histogram] = {}


def request_seconds(endpoint: str) -> Histogram:
    """REQUEST_SECONDS of one endpoint (route rule, a bounded set), looked up once."""
    child = _REQUEST_SECONDS_BY_ENDPOINT.get(endpoint)
    if child is None:
        child = _REQUEST_SECONDS_BY_ENDPOINT[endpoint] = REQUEST_SECONDS.labels(endpoint)
    return child


def render() -> tuple[bytes, str]:
    """The exposition text of this process, or of all workers in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
