"""Ingestion, as the `ingest` blueprint: `POST /v1/reports`, a client's batch checked
(headers, ingest token, refusal limit, body caps, envelope, every report by its oracle) and
stored once by the ingest script (collector/ingest.py) before the 202."""

from __future__ import annotations

from flask import Blueprint, Response, g, request

from ldptel.collector import metrics
from ldptel.collector.errors import ApiError
from ldptel.collector.ingest import check_idempotency_key
from ldptel.collector.instance import current

blueprint = Blueprint("ingest", __name__)


@blueprint.post("/v1/reports")
def post_reports() -> Response:
    collector = current()
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
