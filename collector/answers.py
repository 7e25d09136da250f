"""What every answer of the collector gets, as the `answers` blueprint (app-wide hooks): its
time in the app and the request-seconds metric, the JSON access log line, and the JSON
errors (`{"error": {"field", "reason"}}`: an ApiError, werkzeug's 404/405, Redis down as
503, a bug as 500; never an HTML page)."""

from __future__ import annotations

import logging
import time
import traceback

import redis
from flask import Blueprint, Response, g, jsonify, request
from redis.exceptions import RedisClusterException
from werkzeug.exceptions import HTTPException

from ldptel.collector import metrics
from ldptel.collector.errors import ApiError, unavailable
from ldptel.collector.instance import current
from ldptel.store import logs

ACCESS_LOG = logging.getLogger("ldptel.collector.access")
ERROR_LOG = logging.getLogger("ldptel.collector")

blueprint = Blueprint("answers", __name__)


def configure_logging() -> None:
    """JSON lines on stderr (store/logs.py), unless the host application set up logging."""
    for logger in (ACCESS_LOG, ERROR_LOG):
        if not logger.handlers:
            logger.addHandler(logs.json_handler())
            logger.setLevel(logs.level())  # $LDPTEL_LOG_LEVEL, else INFO
            logger.propagate = False


# -- request bookkeeping -------------------------------------------------------------------
@blueprint.before_app_request
def start_clock() -> None:
    g.started = time.perf_counter()
    g.log = {}


@blueprint.after_app_request
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
        logs.info(ACCESS_LOG, line)  # the line without a LogRecord when it can
    return response


# -- JSON errors -----------------------------------------------------------------------------
def _error_response(error: ApiError) -> tuple[Response, int, dict[str, str]]:
    g.setdefault("log", {})["error"] = error.code
    metrics.REQUESTS_REJECTED.labels(error.code).inc()
    return jsonify(error.body()), error.status, error.headers


@blueprint.app_errorhandler(ApiError)
def api_error(error: ApiError) -> tuple[Response, int, dict[str, str]]:
    return _error_response(error)


@blueprint.app_errorhandler(HTTPException)
def http_error(error: HTTPException) -> tuple[Response, int, dict[str, str]]:
    status = error.code or 500
    field = "method" if status == 405 else "path"
    headers = dict(error.get_headers())
    headers.pop("Content-Type", None)
    api = ApiError(status, field, error.description or error.name, code=f"http_{status}")
    api.headers.update(headers)
    return _error_response(api)


# One handler per class: a cluster client also raises RedisClusterException.
@blueprint.app_errorhandler(redis.RedisError)
@blueprint.app_errorhandler(RedisClusterException)
def redis_error(error: Exception) -> tuple[Response, int, dict[str, str]]:
    metrics.REDIS_ERRORS.inc()
    ERROR_LOG.warning({"event": "redis_error", "type": type(error).__name__})
    return _error_response(unavailable(current().config.retry_after_seconds))


@blueprint.app_errorhandler(Exception)
def unexpected(error: Exception) -> tuple[Response, int, dict[str, str]]:
    # A bug: log where it happened (traceback frames, not the message, which could quote
    # request data) and answer JSON, never an HTML page.
    frames = "".join(traceback.format_tb(error.__traceback__))
    ERROR_LOG.error({"event": "unexpected", "type": type(error).__name__, "at": frames})
    return _error_response(ApiError(500, "server", "internal error", code="internal"))
