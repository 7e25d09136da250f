"""The collector's Flask app factory (its API: collector/openapi.yaml). The routes are
blueprints: `ingest_api` (POST /v1/reports), `campaigns_api` (campaigns and tokens, admin),
`reports_api` (the aggregator's window reports), `operations` (health, readiness, metrics,
the OpenAPI document), over app-wide `answers` (timing, metrics, the access log, JSON
errors) and `cors` (browser origins); every one reads the app's Collector (instance.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from flask import Flask

from ldptel.collector import answers, campaigns_api, ingest_api, operations, reports_api
from ldptel.collector.cors import register_cors
from ldptel.collector.instance import EXTENSION, Collector
from ldptel.collector.settings import CollectorConfig, as_config


class CollectorFlask(Flask):
    """Flask, for an app whose views and hooks are all plain functions."""

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        # Flask asks `inspect` whether each hook and view is a coroutine, on every request.
        return func


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
    app = CollectorFlask(__name__, instance_path=str(Path(__file__).parent))
    # No 308 redirects (werkzeug answers them with HTML, outside the error handlers): a path
    # with a doubled or trailing slash is simply not found.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    app.extensions[EXTENSION] = Collector(settings, clock)
    answers.configure_logging()
    app.register_blueprint(answers.blueprint)  # first: its clock starts before any hook
    register_cors(app, settings.cors_origins)  # before the routes: it answers preflights
    for routes in (operations, campaigns_api, ingest_api, reports_api):
        app.register_blueprint(routes.blueprint)
    return app
