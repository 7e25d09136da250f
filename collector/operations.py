"""The operations endpoints, as the `operations` blueprint: /healthz (the process answers),
/readyz (Redis answers too), /metrics (Prometheus, every worker) and /openapi.yaml."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from ldptel.collector import metrics
from ldptel.collector.instance import current

blueprint = Blueprint("operations", __name__)


@blueprint.get("/healthz")
def healthz() -> Response:
    return jsonify(status="ok")


@blueprint.get("/readyz")
def readyz() -> Response:
    current().redis.ping()  # a RedisError becomes 503
    return jsonify(status="ready")


@blueprint.get("/metrics")
def metrics_text() -> Response:
    body, content_type = metrics.render()
    return Response(body, content_type=content_type)


@blueprint.get("/openapi.yaml")
def openapi() -> Response:
    return Response(current().openapi, content_type="application/yaml")
