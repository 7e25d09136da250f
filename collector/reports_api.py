"""Read-only access to the aggregator's stored window reports, as the `reports` blueprint:
`GET /v1/campaigns/<name>/reports/<window>` with the analyst (or admin) token.

The aggregator stores one JSON document per (campaign, window) (ldptel.store.reports); this serves
those bytes unchanged. <window> is the window start in unix seconds or an ISO date/time
(any instant inside the window works: it is aligned to the campaign's window length).
"""

from __future__ import annotations

import hashlib
import hmac

from flask import Blueprint, Response, request

from ldptel.client.errors import ParameterError
from ldptel.collector.auth import bearer_token
from ldptel.collector.errors import ApiError, bad_request
from ldptel.collector.instance import current
from ldptel.collector.settings import CollectorConfig
from ldptel.store import reports

blueprint = Blueprint("reports", __name__)


def check_analyst(authorization: str | None, settings: CollectorConfig) -> None:
    """Raise 401/403 unless the request carries the analyst token or the admin token."""
    token = bearer_token(authorization)
    allowed = [t for t in (settings.analyst_token, settings.admin_token) if t]
    if not allowed:
        raise ApiError(403, "Authorization", "report endpoints are disabled", code="forbidden")
    given = hashlib.sha256(token.encode()).digest()
    # Compare with every allowed token (no early exit), as digests of equal length.
    matches = [hmac.compare_digest(given, hashlib.sha256(t.encode()).digest()) for t in allowed]
    if not any(matches):
        raise ApiError(403, "Authorization", "not an analyst token", code="forbidden")


@blueprint.get("/v1/campaigns/<name>/reports/<window>")
def get_window_report(name: str, window: str) -> Response:
    collector = current()
    check_analyst(request.headers.get("Authorization"), collector.config)
    try:
        start = reports.parse_window(window)
    except ParameterError as error:
        raise bad_request("window", error.reason) from error
    campaign = collector.registry.campaign(name, fresh=True)
    if campaign is None:
        raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
    config = collector.registry.config(campaign.config_id)
    if config is not None:
        start = config.window_of(start)
    document = reports.load(collector.redis, name, start)
    if document is None:
        raise ApiError(404, "window", "no report for this window yet", code="no_report")
    return Response(
        document,
        mimetype="application/json",
        headers={"Cache-Control": "private, max-age=60"},
    )
