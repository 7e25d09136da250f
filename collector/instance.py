"""What one collector app instance holds (settings, Redis client, registry, auth, ingestor),
kept on the Flask app under EXTENSION; every route module reads it with `current()`."""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import redis
from flask import Request, current_app, request
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from ldptel.collector import metrics
from ldptel.collector.auth import (
    Caller,
    IngestAuth,
    RateLimit,
    RefusalLimit,
)
from ldptel.collector.body import (
    check_headers,
    gunzip_capped,
    named_campaign,
    parse_json,
    read_capped,
    too_large,
    unnamed_batch,
)
from ldptel.collector.errors import ApiError, bad_request
from ldptel.collector.ingest import Batch, Ingestor, parse_batch
from ldptel.collector.settings import CollectorConfig
from ldptel.store.connection import connect as redis_connect
from ldptel.store.registry import Registry

T = TypeVar("T")
EXTENSION = "ldptel.collector"


def connect(config: CollectorConfig) -> Any:
    """A client with its own connection pool (one per worker process, made after fork); a
    Redis Cluster client for a `redis+cluster://` URL (store/connection.py).

    One quick retry reconnects a pooled connection that a Redis restart broke; an ingest
    script that ran but whose reply was lost is then answered from its idempotency mark.
    """
    return redis_connect(
        config.redis_url,
        socket_timeout=config.redis_socket_timeout,
        socket_connect_timeout=min(config.redis_socket_timeout, 2.0),
        retry=Retry(ExponentialBackoff(cap=0.1, base=0.01), 1),
        health_check_interval=30,
    )


class Collector:
    """What one app instance holds: settings, Redis client, registry, auth, ingestor."""

    def __init__(self, config: CollectorConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        #: The time that stamps each batch's window (ingest.py); only `ldptel demo` sets
        #: another one, to simulate past windows.
        self.clock = clock
        self.redis = connect(config)
        self.registry = Registry(self.redis, cache_seconds=config.registry_cache_seconds)
        self.auth = IngestAuth(self.redis, cache_seconds=config.token_cache_seconds)
        rate_limit = RateLimit(config.rate_limit, config.rate_limit_seconds)
        self.refusals = RefusalLimit(
            self.redis, rate_limit, delay_seconds=config.refusal_delay_seconds
        )
        self.ingestor = Ingestor(
            self.redis,
            self.registry,
            idempotency_seconds=config.idempotency_seconds,
            rate_limit=rate_limit,
            wait_replicas=config.redis_wait_replicas,
            wait_timeout_seconds=config.redis_wait_timeout_seconds,
            retry_after_seconds=config.retry_after_seconds,
        )
        self.openapi = resources.files("ldptel.collector").joinpath("openapi.yaml").read_bytes()

    def check_body_headers(self, req: Request) -> str:
        """Reject by headers alone (415/413), before any byte of the body is read; returns
        the content encoding."""
        return check_headers(
            req.mimetype,
            req.content_length,
            req.headers.get("Content-Encoding", ""),
            self.config.max_body_bytes,
        )

    def json_body(self) -> object:
        """The request's JSON body (an admin request), checked against the caps before and
        while reading."""
        req = request._get_current_object()  # type: ignore[attr-defined]
        encoding = self.check_body_headers(req)
        data = read_capped(req.stream, self.config.max_body_bytes)
        if encoding == "gzip":
            data = gunzip_capped(data, self.config.max_body_bytes)
        return parse_json(data)

    def batch_body(self, encoding: str) -> Batch:
        """The request's batch, its text capped by what a valid batch of the campaign it
        names can be (Ingestor.text_limit) before any JSON object is built."""
        req = request._get_current_object()  # type: ignore[attr-defined]
        max_reports = self.config.max_reports_per_batch
        data = read_capped(req.stream, self.config.max_body_bytes)
        if encoding == "gzip":
            data = gunzip_capped(data, self.config.max_body_bytes, self._head_limit)
        name = named_campaign(data)
        if name is None:  # a bad batch: say why (parsed if small, else untouched)
            raise unnamed_batch(data, max_reports)
        limit = self.ingestor.text_limit(name, max_reports)
        if len(data) > limit:
            raise too_large(limit)
        batch = parse_batch(parse_json(data), max_reports)
        if batch.campaign != name:
            raise bad_request("campaign", "must appear once, as a plain string")
        return batch

    def refused_if_failing(self, caller: Caller, step: Callable[[], T]) -> T:
        """`step()`; an ApiError it raises is a refused request of the caller's token, counted
        against its RefusalLimit (if Redis cannot count it, the request is still answered
        with its own error, not a 503)."""
        try:
            return step()
        except ApiError:
            try:
                self.refusals.count(caller.token_hash)
            except (redis.RedisError, RedisClusterException):
                metrics.REDIS_ERRORS.inc()
            raise

    def _head_limit(self, head: bytes) -> int:
        """The inflation cap once the first inflated bytes are known (gunzip_capped)."""
        name = named_campaign(head)
        max_reports = self.config.max_reports_per_batch
        if name is None:  # named further on: until then, the largest valid batch of any campaign
            return self.ingestor.largest_text_limit(max_reports)
        return self.ingestor.text_limit(name, max_reports)


def current() -> Collector:
    """The Collector of the app serving this request."""
    collector: Collector = current_app.extensions[EXTENSION]
    return collector
