"""The dashboard as a Flask app: `create_app(redis_client, analyst_token=None)`.

Read-only: it reads the registry and the window documents the aggregator stores, and writes
only browsers' sign-in sessions. With an analyst token (LDPTEL_ANALYST_TOKEN, the one the
collector's report API takes) every request needs it, as `Authorization: Bearer <token>`, or
the cookie of a session opened at /login (a browser cannot send the header when following a
link; dashboard/access.py); without one, the dashboard is for a trusted network only
(`ldptel dashboard` then binds to loopback). Every answer carries the security headers.

Bad parameters answer JSON `{"error": {"field", "reason"}}` with 400 (404 for an unknown
campaign), as the collector's API does, never an HTML error page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from ldptel.client.errors import ParameterError
from ldptel.dashboard import breakdown_pages, campaign_pages, pages, signin
from ldptel.dashboard.access import SECURITY_HEADERS, AccessSettings, LoginThrottle, Sessions
from ldptel.dashboard.campaign_pages import NotFoundError
from ldptel.dashboard.context import EXTENSION, Dashboard, error_response, token_digest
from ldptel.dashboard.series import Campaigns
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry


def create_app(
    client: RedisClient,
    analyst_token: str | None = None,
    *,
    warm: bool = False,
    access: AccessSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> Flask:
    """The dashboard over one Redis (or Redis Cluster) client; with `warm`, a background
    thread reads every campaign's documents at once, so that the first page need not;
    `clock` (unix seconds) ends the relative periods ("last 7 days")."""
    app = Flask(__name__, instance_path=None)
    app.url_map.strict_slashes = False
    settings = access or AccessSettings()
    dashboard = Dashboard(
        registry=Registry(client),
        campaigns=Campaigns(client),
        settings=settings,
        expected=None if analyst_token is None else token_digest(analyst_token),
        sessions=Sessions(client, settings.session_seconds),
        throttle=LoginThrottle(settings.login_attempts),
        clock=clock,
    )
    app.extensions[EXTENSION] = dashboard
    if warm:
        names = dashboard.registry.names()
        threading.Thread(
            target=dashboard.campaigns.warm, args=(names,), name="dashboard-warm", daemon=True
        ).start()
    app.register_blueprint(signin.blueprint)
    app.register_blueprint(campaign_pages.blueprint)
    app.register_blueprint(breakdown_pages.blueprint)
    _register_common(app)
    return app


def _register_common(app: Flask) -> None:
    """Security headers, JSON errors and the static assets, for every route."""

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.update(SECURITY_HEADERS)
        if not request.path.startswith("/assets/"):
            response.headers["Cache-Control"] = "no-store"  # pages and downloads hold data
        return response

    @app.errorhandler(ParameterError)
    def bad_parameter(error: ParameterError) -> Response:
        return error_response(
            404 if isinstance(error, NotFoundError) else 400, error.field, error.reason
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        return error_response(error.code or 500, "path", error.description or error.name)

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status=204)  # none; a browser asks on every page

    @app.get("/assets/dashboard.css")
    def stylesheet() -> Response:
        return Response(pages.stylesheet(), mimetype="text/css")

    @app.get("/assets/filter.js")
    def script() -> Response:
        return Response(pages.script_file(), mimetype="text/javascript")
