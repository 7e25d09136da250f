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

import hashlib
import hmac
import json
import math
import re
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import TypedDict
from urllib.parse import urlencode

from flask import Flask, Response, redirect, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from ldptel.aggregator.csv_export import write_csv
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.dashboard import pages
from ldptel.dashboard.access import (
    CSRF_COOKIE,
    SECURITY_HEADERS,
    SESSION_COOKIE,
    AccessSettings,
    LoginThrottle,
    Sessions,
    same_origin_path,
)
from ldptel.dashboard.change import Change, change
from ldptel.dashboard.charts import TrendPoint
from ldptel.dashboard.series import Campaigns, Numbers, WindowNumbers, trend, views
from ldptel.store.connection import RedisClient
from ldptel.store.registry import Registry
from ldptel.store.reports import iso

#: Trends drawn at once (each is a chart and a table).
MAX_ITEMS = 12
#: Items whose trend is drawn when none is selected: the largest in the latest window.
DEFAULT_ITEMS = 3
#: The login form's CSRF cookie lasts this long (a form left open longer is reloaded).
CSRF_SECONDS = 3600
#: A CSRF token as the form issues it (secrets.token_urlsafe(32)).
CSRF_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
#: Paths served without the analyst token (besides /assets/).
PUBLIC = frozenset({"/login", "/logout", "/favicon.ico"})


class NotFoundError(ParameterError):
    """A campaign or window that does not exist (404)."""


@dataclass(frozen=True)
class View:
    """A campaign page's data: its config, stored windows, chosen view and numbers."""

    config: CampaignConfig
    windows: list[WindowNumbers]
    selection: pages.Selection
    levels: tuple[str, ...]
    before: Numbers | None
    after: Numbers | None

    @property
    def starts(self) -> list[int]:
        """The windows holding a report of the shown level."""
        return [w.window for w in self.windows if self.selection.level in w.by_level]

    def change(self) -> Change | None:
        if self.before is None or self.after is None or self.before is self.after:
            return None
        return change(self.before, self.after)

    def trends(self) -> dict[str, list[TrendPoint]]:
        return {
            item: trend(self.windows, self.selection.level, item) for item in self.selection.items
        }


class TrendRow(TypedDict):
    """A trend download's row: one item in one window (numbers None: not plotted)."""

    item: str
    window: int
    window_start: str
    level: str
    config_id: str
    n: int
    status: str
    estimate: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    consistent: float | None


class ChangeRow(TypedDict):
    """A change download's row: one item's change between the two windows."""

    item: str
    before: float
    after: float
    difference: float
    stderr: float
    z: float
    significant: bool


def _token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def create_app(
    client: RedisClient,
    analyst_token: str | None = None,
    *,
    warm: bool = False,
    access: AccessSettings | None = None,
) -> Flask:
    """The dashboard over one Redis (or Redis Cluster) client; with `warm`, a background
    thread reads every campaign's documents at once, so that the first page need not."""
    app = Flask(__name__, instance_path=None)
    app.url_map.strict_slashes = False
    registry = Registry(client)
    campaigns = Campaigns(client)
    if warm:
        threading.Thread(
            target=campaigns.warm, args=(registry.names(),), name="dashboard-warm", daemon=True
        ).start()
    settings = access or AccessSettings()
    expected = None if analyst_token is None else _token_digest(analyst_token)
    sessions = Sessions(client, settings.session_seconds)
    throttle = LoginThrottle(settings.login_attempts)

    def allowed() -> bool:
        if expected is None:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            _token_digest(token.strip()), expected
        ):
            return True
        return sessions.is_open(request.cookies.get(SESSION_COOKIE, ""))

    def from_proxy() -> bool:
        return request.remote_addr in settings.trusted_proxies

    def secure() -> bool:
        """Served over HTTPS here, or a trusted proxy says its client used HTTPS."""
        forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip()
        return request.is_secure or (from_proxy() and forwarded.lower() == "https")

    def client_address() -> str:
        """The sign-in throttle's client: the proxy's last hop when the proxy is trusted."""
        last_hop = request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
        return last_hop if from_proxy() and last_hop else request.remote_addr or ""

    def set_cookie(response: BaseResponse, name: str, value: str, seconds: int, path: str) -> None:
        response.set_cookie(
            name, value, max_age=seconds, path=path, secure=secure(), httponly=True,
            samesite="Strict",
        )  # fmt: skip

    def render(title: str, body: str, script: str = "") -> str:
        return pages.page(title, body, "/", script, sign_out=expected is not None)

    @app.before_request
    def check_access() -> BaseResponse | None:
        if request.path in PUBLIC or request.path.startswith("/assets/"):
            return None
        if allowed():
            return None
        if request.path.endswith((".csv", ".json")):
            return error_response(401, "Authorization", "analyst token required")
        target = same_origin_path(request.full_path.rstrip("?")) or "/"
        return redirect("/login?" + urlencode({"next": target}))

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

    @app.get("/login")
    def login_form() -> BaseResponse:
        target = same_origin_path(request.args.get("next", "/")) or "/"
        # The form's token stays the cookie's while the cookie lasts: a second form (another
        # tab, a reload) must not make the first one's post fail.
        held = request.cookies.get(CSRF_COOKIE, "")
        csrf = held if CSRF_TOKEN.fullmatch(held) else secrets.token_urlsafe(32)
        body = (
            '<form method="post" action="/login"><label>analyst token '
            '<input type="password" name="token" autocomplete="current-password" autofocus>'
            f'</label><input type="hidden" name="next" value="{escape(target)}">'
            f'<input type="hidden" name="csrf" value="{csrf}">'
            '<button type="submit">Open</button></form>'
        )
        page = pages.page("ldptel dashboard: sign in", body, "/")
        response = Response(page, mimetype="text/html")
        set_cookie(response, CSRF_COOKIE, csrf, CSRF_SECONDS, "/login")
        return response

    @app.post("/login")
    def login() -> BaseResponse:
        address = client_address()
        wait = throttle.retry_after(address)
        if wait:
            refused = error_response(429, "token", "too many failed sign-ins; try again later")
            refused.headers["Retry-After"] = str(wait)
            return refused
        csrf = request.form.get("csrf", "")
        if not csrf or not hmac.compare_digest(csrf, request.cookies.get(CSRF_COOKIE, "")):
            return error_response(403, "csrf", "sign in from this site's /login form")
        token = request.form.get("token", "")
        if expected is None or not hmac.compare_digest(_token_digest(token), expected):
            throttle.failed(address)
            return error_response(403, "token", "not the analyst token")
        response = redirect(same_origin_path(request.form.get("next", "/")) or "/", 303)
        set_cookie(response, SESSION_COOKIE, sessions.open(), settings.session_seconds, "/")
        response.delete_cookie(CSRF_COOKIE, path="/login")
        return response

    @app.post("/logout")
    def logout() -> BaseResponse:
        sessions.close(request.cookies.get(SESSION_COOKIE, ""))
        response = redirect("/login", 303)
        set_cookie(response, SESSION_COOKIE, "", 0, "/")
        return response

    @app.get("/")
    def campaign_list() -> str:
        rows = [campaign_row(name) for name in registry.names()]
        body = pages.campaign_list(rows, "/campaigns/{name}")
        return render("ldptel campaigns", body)

    def campaign_row(name: str) -> pages.CampaignRow:
        config = current_config(name)
        windows = campaigns.windows(name)
        return pages.CampaignRow(
            name=name,
            oracle=config.oracle,
            epsilon=config.epsilon,
            domain=domain_text(config),
            levels=tuple(f"{k} {v:.3g}" for k, v in config.levels.items()),
            windows=len(windows),
            latest=windows[-1].by_level.get("") if windows else None,
            last_built=max((w.built_at for w in windows), default="never"),
        )

    def current_config(name: str) -> CampaignConfig:
        config = registry.current_config(name)
        if config is None:
            raise NotFoundError("campaign", f"unknown campaign {name!r}")
        return config

    def view(name: str) -> View:
        config = current_config(name)
        windows = campaigns.windows(name)
        levels = sorted({level for w in windows for level in w.by_level} - {""})
        level = request.args.get("level", "")
        if level and level not in levels:
            raise ParameterError("level", f"no reports of level {level!r}")
        shown = [w.by_level[level] for w in windows if level in w.by_level]
        by_start = {n.window: n for n in shown}
        after = window_argument("to", by_start, shown[-1] if shown else None)
        before = window_argument("from", by_start, shown[-2] if len(shown) > 1 else after)
        items = tuple(dict.fromkeys(request.args.getlist("items")))
        if len(items) > MAX_ITEMS:
            raise ParameterError("items", f"at most {MAX_ITEMS} at once")
        if not items and after is not None and after.ok:
            top = sorted(range(len(after.items)), key=lambda i: -after.estimate[i])
            items = tuple(after.items[i] for i in top[:DEFAULT_ITEMS])
        search = request.args.get("q", "")
        if len(search) > 200:
            raise ParameterError("q", "at most 200 characters")
        selection = pages.Selection(
            level,
            items,
            None if before is None else before.window,
            None if after is None else after.window,
            search,
        )
        return View(config, windows, selection, tuple(levels), before, after)

    def window_argument(
        field: str, by_start: dict[int, Numbers], default: Numbers | None
    ) -> Numbers | None:
        text = request.args.get(field)
        if text is None:
            return default
        if not (text.isascii() and text.isdigit()) or int(text) not in by_start:
            raise ParameterError(field, "not a stored window of this view (unix seconds)")
        return by_start[int(text)]

    @app.get("/campaigns/<name>")
    def campaign_page(name: str) -> str:
        shown = view(name)
        selection = shown.selection
        report = None
        if shown.after is not None:
            held = next(w for w in shown.windows if w.window == shown.after.window)
            document = campaigns.document(name, held.window, held.version)
            report = None if document is None else views(document).get(selection.level)
        found = shown.change()
        base = f"/campaigns/{name}"
        query = selection.query()
        body = "".join(
            [
                f'<p class="meta">{escape(meta_line(shown))}</p>',
                pages.privacy_section(report),
                f'<form method="get" action="{escape(base)}" class="view">',
                pages.controls(selection, shown.levels, shown.starts),
                pages.window_section(
                    report, latest=shown.selection.after == max(shown.starts, default=None)
                ),
                pages.trends_section(
                    shown.trends(),
                    shown.after.confidence if shown.after else 0.95,
                    pages.download_links(f"{base}/trend", query, "trends"),
                ),
                pages.change_html(found, shown.before, shown.after),
                pages.items_section(
                    shown.after,
                    found,
                    selection,
                    pages.download_links(f"{base}/change", query, "items and changes"),
                ),
                "</form>",
            ]
        )
        return render(name, body, pages.FILTER_SCRIPT)

    @app.get("/campaigns/<name>/trend.<kind>")
    def trend_download(name: str, kind: str) -> Response:
        shown = view(name)
        rows = [
            trend_row(item, shown.selection.level, point)
            for item, points in shown.trends().items()
            for point in points
        ]
        return download(
            rows, kind, f"{name}-trend", {"campaign": name, "level": shown.selection.level}
        )

    @app.get("/campaigns/<name>/change.<kind>")
    def change_download(name: str, kind: str) -> Response:
        shown = view(name)
        found = shown.change()
        if found is None:
            raise ParameterError("from", "two different windows with reports are needed")
        search = shown.selection.search.lower()
        rows = [
            change_row(found, i) for i, item in enumerate(found.items) if search in item.lower()
        ]
        about = {
            "campaign": name,
            "level": shown.selection.level,
            "from": shown.selection.before,
            "to": shown.selection.after,
            "threshold": None if math.isinf(found.threshold) else found.threshold,
            "expected_false_flags": found.false_flags,
            "untested": found.untested,
        }
        return download(rows, kind, f"{name}-change", about)

    return app


def domain_text(config: CampaignConfig) -> str:
    """What a campaign's reports are about: a numeric range, an open domain's longest value,
    or the domain's size."""
    if config.range is not None:
        low, high = config.range
        return f"range [{low:g}, {high:g}]"
    if config.max_length is not None:
        return f"free text, max_length {config.max_length} bytes"
    return f"{config.domain_size:,} items"


def meta_line(shown: View) -> str:
    config = shown.config
    return (
        f"{config.oracle.upper()}, epsilon {config.epsilon:.3g}, {domain_text(config)}, "
        f"{len(shown.windows):,} windows stored"
    )


def trend_row(item: str, level: str, point: TrendPoint) -> TrendRow:
    return {
        "item": item,
        "window": point.window,
        "window_start": iso(point.window),
        "level": level,
        "config_id": point.config_id,
        "n": point.n,
        "status": point.status,
        "estimate": point.estimate,
        "stderr": point.stderr,
        "ci_low": point.ci_low,
        "ci_high": point.ci_high,
        "consistent": point.consistent,
    }


def change_row(found: Change, i: int) -> ChangeRow:
    return {
        "item": found.items[i],
        "before": float(found.before[i]),
        "after": float(found.after[i]),
        "difference": float(found.difference[i]),
        "stderr": float(found.stderr[i]),
        "z": float(found.z[i]),
        "significant": bool(found.significant[i]),
    }


def download(
    rows: list[TrendRow] | list[ChangeRow], kind: str, stem: str, about: Mapping[str, object]
) -> Response:
    """Rows as CSV (one header line; floats in full precision) or JSON (with `about`)."""
    disposition = {"Content-Disposition": f'attachment; filename="{stem}.{kind}"'}
    if kind == "json":
        body = json.dumps({**about, "rows": rows}, separators=(",", ":"))
        return Response(body, mimetype="application/json", headers=disposition)
    if kind != "csv":
        raise ParameterError("format", "must be .csv or .json")
    text = write_csv(list(rows[0]), [list(row.values()) for row in rows]) if rows else ""
    return Response(text, mimetype="text/csv", headers=disposition)


def error_response(status: int, field: str, reason: str) -> Response:
    body = json.dumps({"error": {"field": field, "reason": reason}})
    return Response(body, status=status, mimetype="application/json")
