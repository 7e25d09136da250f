"""The collector's Flask app factory and its HTTP endpoints (docs/openapi.yaml)."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import redis
from flask import Flask, Request, Response, g, jsonify, request
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from werkzeug.exceptions import HTTPException

from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.errors import LdptelError
from ldptel.collector import metrics
from ldptel.collector.auth import (
    Caller,
    IngestAuth,
    RateLimit,
    RefusalLimit,
    check_admin,
    create_token,
)
from ldptel.collector.body import (
    check_headers,
    gunzip_capped,
    lone_surrogate,
    named_campaign,
    parse_json,
    read_capped,
    too_large,
    unnamed_batch,
)
from ldptel.collector.cors import register_cors
from ldptel.collector.errors import ApiError, bad_request, unavailable
from ldptel.collector.ingest import Batch, Ingestor, check_idempotency_key, parse_batch
from ldptel.collector.reports_api import register_reports_api
from ldptel.collector.settings import CollectorConfig, as_config
from ldptel.store import logs
from ldptel.store.connection import connect as redis_connect
from ldptel.store.registry import CampaignRetiredError, Registry

T = TypeVar("T")
ACCESS_LOG = logging.getLogger("ldptel.collector.access")
ERROR_LOG = logging.getLogger("ldptel.collector")
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


def _collector() -> Collector:
    from flask import current_app

    collector: Collector = current_app.extensions[EXTENSION]
    return collector


def _configure_logging() -> None:
    """JSON lines on stderr (store/logs.py), unless the host application set up logging."""
    for logger in (ACCESS_LOG, ERROR_LOG):
        if not logger.handlers:
            logger.addHandler(logs.json_handler())
            logger.setLevel(logs.level())  # $LDPTEL_LOG_LEVEL, else INFO
            logger.propagate = False


def create_app(
    config: CollectorConfig | Mapping[str, Any] | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Flask:
    """The collector as a WSGI app: `create_app({"redis_url": ..., "admin_token": ...})`.
    `clock` stamps the windows of stored batches: the wall clock, except in `ldptel demo`,
    which runs its in-process collector on a simulated clock to fill past windows."""
    settings = as_config(config)
    # instance_path given: Flask cannot locate it through the editable install's finder.
    app = Flask(__name__, instance_path=str(Path(__file__).parent))
    # No 308 redirects (werkzeug answers them with HTML, outside the error handlers): a path
    # with a doubled or trailing slash is simply not found.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    app.extensions[EXTENSION] = Collector(settings, clock)
    _configure_logging()
    _register_hooks(app)
    register_cors(app, settings.cors_origins)  # before the routes: it answers preflights
    _register_errors(app)
    _register_ops(app)
    _register_campaigns(app)
    _register_reports(app)
    register_reports_api(app)  # GET /v1/campaigns/<name>/reports/<window> (aggregator's)
    return app


# -- request bookkeeping -------------------------------------------------------------------
def _register_hooks(app: Flask) -> None:
    @app.before_request
    def start_clock() -> None:
        g.started = time.perf_counter()
        g.log = {}

    @app.after_request
    def log_request(response: Response) -> Response:
        state = g._get_current_object()
        req = request._get_current_object()  # type: ignore[attr-defined]
        seconds = time.perf_counter() - state.get("started", time.perf_counter())
        endpoint = req.url_rule.rule if req.url_rule else "unmatched"
        metrics.request_seconds(endpoint).observe(seconds)
        if ACCESS_LOG.isEnabledFor(logging.INFO):
            # Method, route, status, timing and counts only: no payload, no client address.
            line = {
                "method": req.method,
                "path": req.path,
                "status": response.status_code,
                "ms": round(seconds * 1000, 3),
                **state.get("log", {}),
            }
            ACCESS_LOG.info(line)
        return response


def _error_response(error: ApiError) -> tuple[Response, int, dict[str, str]]:
    g.setdefault("log", {})["error"] = error.code
    metrics.REQUESTS_REJECTED.labels(error.code).inc()
    return jsonify(error.body()), error.status, error.headers


def _register_errors(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def api_error(error: ApiError) -> tuple[Response, int, dict[str, str]]:
        return _error_response(error)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int, dict[str, str]]:
        status = error.code or 500
        field = "method" if status == 405 else "path"
        headers = dict(error.get_headers())
        headers.pop("Content-Type", None)
        api = ApiError(status, field, error.description or error.name, code=f"http_{status}")
        api.headers.update(headers)
        return _error_response(api)

    # One handler per class: a cluster client also raises RedisClusterException.
    @app.errorhandler(redis.RedisError)
    @app.errorhandler(RedisClusterException)
    def redis_error(error: Exception) -> tuple[Response, int, dict[str, str]]:
        metrics.REDIS_ERRORS.inc()
        ERROR_LOG.warning({"event": "redis_error", "type": type(error).__name__})
        return _error_response(unavailable(_collector().config.retry_after_seconds))

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[Response, int, dict[str, str]]:
        # A bug: log where it happened (traceback frames, not the message, which could
        # quote request data) and answer JSON, never an HTML page.
        frames = "".join(traceback.format_tb(error.__traceback__))
        ERROR_LOG.error({"event": "unexpected", "type": type(error).__name__, "at": frames})
        return _error_response(ApiError(500, "server", "internal error", code="internal"))


# -- operations ----------------------------------------------------------------------------
def _register_ops(app: Flask) -> None:
    @app.get("/healthz")
    def healthz() -> Response:
        return jsonify(status="ok")

    @app.get("/readyz")
    def readyz() -> Response:
        _collector().redis.ping()  # a RedisError becomes 503
        return jsonify(status="ready")

    @app.get("/metrics")
    def metrics_text() -> Response:
        body, content_type = metrics.render()
        return Response(body, content_type=content_type)

    @app.get("/openapi.yaml")
    def openapi() -> Response:
        return Response(_collector().openapi, content_type="application/yaml")


# -- campaigns and tokens (admin) ------------------------------------------------------------
def _register_campaigns(app: Flask) -> None:
    @app.post("/v1/campaigns")
    def create_campaign() -> tuple[Response, int]:
        collector = _collector()
        check_admin(request.headers.get("Authorization"), collector.config.admin_token)
        data = collector.json_body()
        check_campaign_text(data)
        try:
            config = CampaignConfig.from_dict(data)
        except LdptelError as error:
            raise bad_request(error.field, error.reason) from error
        except (TypeError, ValueError, OverflowError) as error:
            raise bad_request("config", "invalid campaign config") from error
        try:
            config_id, changed = collector.registry.create(config)
        except CampaignRetiredError as error:
            raise ApiError(
                409, "name", "retired campaign; choose a new name", code="retired_campaign"
            ) from error
        body = {"name": config.name, "config_id": config_id, "changed": changed}
        return jsonify(body), 201 if changed else 200

    @app.get("/v1/campaigns/<name>")
    def get_campaign(name: str) -> Response:
        collector = _collector()
        campaign = collector.registry.campaign(name, fresh=True)
        if campaign is None:
            raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
        if campaign.retired:
            raise ApiError(410, "campaign", "retired campaign", code="retired_campaign")
        etag = f'"{campaign.config_id}"'
        cache = f"public, max-age={collector.config.config_max_age}"
        headers = {"ETag": etag, "Cache-Control": cache}
        if _etag_matches(request.headers.get("If-None-Match", ""), campaign.config_id):
            return Response(status=304, headers=headers)
        config = collector.registry.config(campaign.config_id)
        if config is None:
            raise ApiError(
                404, "campaign", "config missing from the registry", code="unknown_config"
            )
        response = jsonify({**config.to_dict(), "config_id": campaign.config_id})
        response.headers.update(headers)
        return response

    @app.post("/v1/campaigns/<name>/retire")
    def retire_campaign(name: str) -> Response:
        collector = _collector()
        check_admin(request.headers.get("Authorization"), collector.config.admin_token)
        if not collector.registry.retire(name):
            raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
        return jsonify(name=name, retired=True)

    @app.post("/v1/tokens")
    def create_ingest_token() -> tuple[Response, int]:
        collector = _collector()
        check_admin(request.headers.get("Authorization"), collector.config.admin_token)
        data = collector.json_body()
        if not isinstance(data, dict) or not isinstance(data.get("app"), str):
            raise bad_request("app", "is required (a string)")
        if set(data) - {"app"}:
            raise bad_request(sorted(set(data) - {"app"})[0], "unknown field")
        token = create_token(collector.redis, data["app"])
        return jsonify(app=data["app"], token=token), 201


def check_campaign_text(data: object) -> None:
    """What the config parser lets through: a name with a trailing newline (its pattern ends
    in `$`), and lone surrogates, which no Redis key or UTF-8 text can hold."""
    where = lone_surrogate(data)
    if where is not None:
        raise bad_request(where, "holds a lone UTF-16 surrogate (not valid Unicode)")
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and not NAME_PATTERN.fullmatch(name):
        raise bad_request("name", "must match [a-z0-9][a-z0-9_-]{0,63}")


def _etag_matches(header: str, config_id: str) -> bool:
    """If-None-Match: `*` or a list of (possibly weak) entity tags."""
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")]
    return "*" in tags or config_id in tags


# -- ingestion -----------------------------------------------------------------------------
def _register_reports(app: Flask) -> None:
    @app.post("/v1/reports")
    def post_reports() -> Response:
        collector = _collector()
        req = request._get_current_object()  # type: ignore[attr-defined]
        headers = req.headers
        log = g.log
        encoding = collector.check_body_headers(req)
        key = check_idempotency_key(headers.get("Idempotency-Key"))
        caller = collector.auth.caller(headers.get("Authorization"))
        collector.refusals.check(caller.token_hash)  # 429 before the body is touched
        batch = collector.refused_if_failing(caller, lambda: collector.batch_body(encoding))
        log.update(campaign=batch.campaign, reports=len(batch.reports))
        try:
            valid = collector.refused_if_failing(caller, lambda: collector.ingestor.validate(batch))
            # Counted by the ingest script, whatever its answer.
            stored = collector.ingestor.append(valid, key, caller.token_hash, now=collector.clock())
        except ApiError as error:
            metrics.REPORTS_REJECTED.labels(error.code).inc(len(batch.reports))
            raise
        log.update(accepted=stored.accepted, duplicate=stored.duplicate)
        if stored.duplicate:
            metrics.DUPLICATE_BATCHES.inc()
        else:
            metrics.REPORTS_ACCEPTED.inc(stored.accepted)
            metrics.BATCH_SIZE.observe(stored.accepted)
        # Two integers and a boolean: formatted directly, the hot path skips jsonify.
        duplicate = "true" if stored.duplicate else "false"
        body = f'{{"accepted":{stored.accepted:d},"duplicate":{duplicate}}}'
        return Response(body, 202, mimetype="application/json")
