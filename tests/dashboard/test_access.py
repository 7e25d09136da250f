"""Signing in to the dashboard, tried as an attacker would, over real HTTP: the page after
sign-in is a path of this site only (the usual open-redirect bypasses refused, never a 5xx),
the session is a random server-side id with an expiry and a sign-out, the cookie is Secure
when the browser used HTTPS (directly or through a trusted proxy), the login form needs its
CSRF token, failed sign-ins are throttled per client, and every answer carries the security
headers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from dashboard_site import ANALYST_TOKEN as TOKEN
from dashboard_site import cookie_value, csrf_field, sign_in
from waiting import wait_for

from ldptel.cli.demo_process import serve
from ldptel.dashboard import create_app
from ldptel.dashboard.access import (
    LOGIN_WINDOW_SECONDS,
    SECURITY_HEADERS,
    AccessSettings,
    LoginThrottle,
    same_origin_path,
)

#: Redirect targets that a browser would take off this site (or that no path may hold).
BYPASSES = [
    "//evil.example",
    "///evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "/\\/evil.example",
    "/%09/evil.example",
    "/\t/evil.example",
    "%2F%2Fevil.example",
    "/%2F/evil.example",
    "/%252F/evil.example",
    "/%5Cevil.example",
    "/%5C%5Cevil.example",
    "https://evil.example",
    "http:evil.example",
    "javascript:alert(1)",
    "/x\nLocation: //evil.example",
    "/x%0d%0aSet-Cookie:%20a=b",
    "/\u2028/evil.example",
    "evil.example",
    "",
]


@pytest.fixture
def dashboard(redis_client: Any) -> Iterator[str]:
    with serve(create_app(redis_client, analyst_token=TOKEN)) as base:
        yield base


@pytest.mark.parametrize("target", BYPASSES)
def test_a_target_off_this_site_is_refused(target: str) -> None:
    assert same_origin_path(target) is None


@pytest.mark.parametrize(
    "target", ["/", "/campaigns/demo-screens?items=a&items=b", "/campaigns/x?q=%2Fa&level=high"]
)
def test_a_path_of_this_site_is_kept(target: str) -> None:
    assert same_origin_path(target) == target


def test_after_sign_in_the_browser_stays_on_this_site(dashboard: str) -> None:
    for target in BYPASSES:
        session = requests.Session()
        form = session.get(f"{dashboard}/login", params={"next": target}, timeout=10)
        assert form.status_code == 200 and 'name="next" value="/"' in form.text
        answer = sign_in(dashboard, session, target)
        assert (answer.status_code, answer.headers["Location"]) == (303, "/"), target
    kept = sign_in(dashboard, requests.Session(), "/campaigns/x?items=a&items=b")
    assert kept.headers["Location"] == "/campaigns/x?items=a&items=b"


def test_a_page_asked_for_before_sign_in_is_the_one_shown_after(dashboard: str) -> None:
    asked = requests.get(
        f"{dashboard}/campaigns/x", params={"items": ["a", "b"]}, allow_redirects=False, timeout=10
    )
    assert asked.status_code == 302
    session = requests.Session()
    form = session.get(dashboard + asked.headers["Location"], timeout=10)
    assert 'name="next" value="/campaigns/x?items=a&amp;items=b"' in form.text


def test_the_session_is_random_server_side_and_ends_at_sign_out(dashboard: str) -> None:
    first, second = requests.Session(), requests.Session()
    cookies = []
    for session in (first, second):
        answer = sign_in(dashboard, session)
        assert answer.status_code == 303
        cookie = answer.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=28800" in cookie
        assert "Secure" not in cookie  # plain HTTP, no trusted proxy: a Secure cookie is lost
        cookies.append(session.cookies["ldptel_session"])
    assert cookies[0] != cookies[1] and TOKEN not in "".join(cookies)
    assert len(cookies[0]) >= 43  # 256 bits, url-safe base64
    assert first.get(f"{dashboard}/", timeout=10).url == f"{dashboard}/"
    out = first.post(f"{dashboard}/logout", allow_redirects=False, timeout=10)
    assert out.status_code == 303 and out.headers["Location"] == "/login"
    stolen = {"ldptel_session": cookies[0]}  # the old cookie, replayed after sign-out
    assert requests.get(f"{dashboard}/x.json", cookies=stolen, timeout=10).status_code == 401
    assert second.get(f"{dashboard}/x.json", timeout=10).status_code == 404  # still signed in


def test_a_session_expires(redis_client: Any) -> None:
    settings = AccessSettings(session_seconds=1)
    with serve(create_app(redis_client, analyst_token=TOKEN, access=settings)) as base:
        answer = sign_in(base, requests.Session())
        assert "Max-Age=1" in answer.headers["Set-Cookie"]
        # Replayed as a browser that kept it would: the server must refuse it on its own.
        cookie = {"ldptel_session": cookie_value(answer)}

        def refused() -> bool:
            return requests.get(f"{base}/x.json", cookies=cookie, timeout=10).status_code == 401

        wait_for(refused, "the expired session refused", interval=0.05)


def test_the_cookie_is_secure_behind_a_trusted_proxy_that_says_https(redis_client: Any) -> None:
    https = {"X-Forwarded-Proto": "https"}
    trusted = AccessSettings(trusted_proxies=frozenset({"127.0.0.1"}))
    with serve(create_app(redis_client, analyst_token=TOKEN, access=trusted)) as base:
        answer = sign_in(base, requests.Session(), headers=https)
        assert "; Secure" in answer.headers["Set-Cookie"]
    with serve(create_app(redis_client, analyst_token=TOKEN)) as base:  # no trusted proxy
        answer = sign_in(base, requests.Session(), headers=https)
        assert "Secure" not in answer.headers["Set-Cookie"]  # anyone can send the header


def test_login_without_the_forms_csrf_token_is_refused(dashboard: str) -> None:
    session = requests.Session()
    csrf = csrf_field(session.get(f"{dashboard}/login", timeout=10))
    for data, cookies in [
        ({"token": TOKEN}, None),  # another site's form: no field, no cookie (SameSite)
        ({"token": TOKEN, "csrf": csrf}, {}),  # the field without its cookie
        ({"token": TOKEN, "csrf": csrf[::-1]}, None),  # a field that is not the cookie's
    ]:
        jar = session.cookies if cookies is None else cookies
        answer = requests.post(f"{dashboard}/login", data=data, cookies=jar, timeout=10)
        assert answer.status_code == 403 and answer.json()["error"]["field"] == "csrf"
        assert "Set-Cookie" not in answer.headers


def test_failed_sign_ins_are_throttled_per_client(redis_client: Any) -> None:
    settings = AccessSettings(login_attempts=3, trusted_proxies=frozenset({"127.0.0.1"}))
    one, other = {"X-Forwarded-For": "192.0.2.1"}, {"X-Forwarded-For": "192.0.2.2"}
    with serve(create_app(redis_client, analyst_token=TOKEN, access=settings)) as base:
        session = requests.Session()
        for _ in range(3):
            assert sign_in(base, session, token="guess", headers=one).status_code == 403
        refused = sign_in(base, session, headers=one)  # even the right token, now
        assert refused.status_code == 429 and refused.json()["error"]["field"] == "token"
        assert 0 < int(refused.headers["Retry-After"]) <= LOGIN_WINDOW_SECONDS
        assert sign_in(base, requests.Session(), headers=other).status_code == 303


def test_the_throttle_forgets_a_client_when_its_window_ends() -> None:
    now = [1000.0]
    throttle = LoginThrottle(2, clock=lambda: now[0])
    throttle.failed("192.0.2.7")
    throttle.failed("192.0.2.7")
    assert throttle.retry_after("192.0.2.7") == LOGIN_WINDOW_SECONDS
    assert throttle.retry_after("192.0.2.8") == 0
    held = repr(throttle.failures)
    assert "192.0.2.7" not in held and b"192.0.2.7" not in b"".join(throttle.failures)
    now[0] += LOGIN_WINDOW_SECONDS
    assert throttle.retry_after("192.0.2.7") == 0


def test_every_answer_carries_the_security_headers(dashboard: str) -> None:
    session = requests.Session()
    sign_in(dashboard, session)
    answers = [
        session.get(f"{dashboard}/", timeout=10),
        session.get(f"{dashboard}/campaigns/nope", timeout=10),  # 404 JSON
        session.get(f"{dashboard}/assets/dashboard.css", timeout=10),
        requests.get(f"{dashboard}/x.csv", timeout=10),  # 401 JSON
        requests.get(f"{dashboard}/login", timeout=10),
        requests.post(f"{dashboard}/login", timeout=10),  # 403 JSON (no CSRF token)
        requests.put(f"{dashboard}/", timeout=10),  # 405 JSON
    ]
    for answer in answers:
        for name, value in SECURITY_HEADERS.items():
            assert answer.headers[name] == value, (answer.url, name)
        if answer.status_code >= 400:
            assert answer.headers["Content-Type"] == "application/json"
            assert "error" in answer.json()
    assert "frame-ancestors 'none'" in SECURITY_HEADERS["Content-Security-Policy"]
