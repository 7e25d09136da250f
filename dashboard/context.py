"""What one dashboard app holds (registry, cached documents, the analyst token's digest, the
sign-in sessions and throttle), kept on the Flask app; every blueprint reads it with
`current()`, and `error_response` is the one JSON error every route answers."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flask import Response, current_app

from ldptel.dashboard.access import AccessSettings, LoginThrottle, Sessions
from ldptel.dashboard.series import Campaigns
from ldptel.store.registry import Registry

EXTENSION = "ldptel.dashboard"


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Dashboard:
    """The app's state: `expected` is the analyst token's digest (None: no sign-in)."""

    registry: Registry
    campaigns: Campaigns
    settings: AccessSettings
    expected: bytes | None
    sessions: Sessions
    throttle: LoginThrottle
    #: Unix seconds now: where a relative period ("last 7 days") ends.
    clock: Callable[[], float] = field(default=time.time)


def current() -> Dashboard:
    """The Dashboard of the app serving this request."""
    dashboard: Dashboard = current_app.extensions[EXTENSION]
    return dashboard


def error_response(status: int, field: str, reason: str) -> Response:
    body = json.dumps({"error": {"field": field, "reason": reason}})
    return Response(body, status=status, mimetype="application/json")
