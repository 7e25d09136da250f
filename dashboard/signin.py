"""Signing in to the dashboard (dashboard/access.py holds the rules): every request needs the
analyst token, as a Bearer header or a session opened at /login; the login form with its CSRF
token and throttle; sign-out. Without an analyst token the dashboard is open."""

from __future__ import annotations

import hmac
import re
import secrets
from html import escape
from urllib.parse import urlencode

from flask import Blueprint, Response, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from ldptel.dashboard import pages
from ldptel.dashboard.access import CSRF_COOKIE, SESSION_COOKIE, same_origin_path
from ldptel.dashboard.context import current, error_response, token_digest

#: The login form's CSRF cookie lasts this long (a form left open longer is reloaded).
CSRF_SECONDS = 3600
#: A CSRF token as the form issues it (secrets.token_urlsafe(32)).
CSRF_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
#: Paths served without the analyst token (besides /assets/).
PUBLIC = frozenset({"/login", "/logout", "/favicon.ico"})

blueprint = Blueprint("signin", __name__)


def allowed() -> bool:
    dashboard = current()
    if dashboard.expected is None:
        return True
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(
        token_digest(token.strip()), dashboard.expected
    ):
        return True
    return dashboard.sessions.is_open(request.cookies.get(SESSION_COOKIE, ""))


def from_proxy() -> bool:
    return request.remote_addr in current().settings.trusted_proxies


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


@blueprint.before_app_request
def check_access() -> BaseResponse | None:
    if request.path in PUBLIC or request.path.startswith("/assets/"):
        return None
    if allowed():
        return None
    if request.path.endswith((".csv", ".json")):
        return error_response(401, "Authorization", "analyst token required")
    target = same_origin_path(request.full_path.rstrip("?")) or "/"
    return redirect("/login?" + urlencode({"next": target}))


@blueprint.get("/login")
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
    page = pages.page("ldptel dashboard: sign in", body, "/", footer=pages.FOOTERS["signin"])
    response = Response(page, mimetype="text/html")
    set_cookie(response, CSRF_COOKIE, csrf, CSRF_SECONDS, "/login")
    return response


@blueprint.post("/login")
def login() -> BaseResponse:
    address = client_address()
    dashboard = current()
    wait = dashboard.throttle.retry_after(address)
    if wait:
        refused = error_response(429, "token", "too many failed sign-ins; try again later")
        refused.headers["Retry-After"] = str(wait)
        return refused
    csrf = request.form.get("csrf", "")
    if not csrf or not hmac.compare_digest(csrf, request.cookies.get(CSRF_COOKIE, "")):
        return error_response(403, "csrf", "sign in from this site's /login form")
    token = request.form.get("token", "")
    if dashboard.expected is None or not hmac.compare_digest(
        token_digest(token), dashboard.expected
    ):
        dashboard.throttle.failed(address)
        return error_response(403, "token", "not the analyst token")
    response = redirect(same_origin_path(request.form.get("next", "/")) or "/", 303)
    set_cookie(
        response, SESSION_COOKIE, dashboard.sessions.open(), dashboard.settings.session_seconds, "/"
    )
    response.delete_cookie(CSRF_COOKIE, path="/login")
    return response


@blueprint.post("/logout")
def logout() -> BaseResponse:
    current().sessions.close(request.cookies.get(SESSION_COOKIE, ""))
    response = redirect("/login", 303)
    set_cookie(response, SESSION_COOKIE, "", 0, "/")
    return response
