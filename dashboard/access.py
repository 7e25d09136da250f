"""Who may read the dashboard, and how a browser signs in (docs/dashboard.md, "Sign-in").

With an analyst token, a request carries it as `Authorization: Bearer <token>`, or carries
the cookie of a session a browser opened at /login: a random id (`secrets.token_urlsafe`,
256 bits) whose SHA-256 is kept in Redis with the session's expiry, so neither the token nor
a usable session id is stored. The login form carries a CSRF token (double submit: a cookie
and a form field that must match; SameSite=Strict keeps the cookie off other sites' posts),
failed sign-ins are throttled per client, and the page a sign-in goes to is a path of this
site only (OWASP, "Unvalidated Redirects and Forwards")."""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from ldptel.store import keys
from ldptel.store.connection import RedisClient

SESSION_COOKIE = "ldptel_session"
CSRF_COOKIE = "ldptel_csrf"
#: A redirect target longer than this is refused (a sign-in goes to a page's URL).
MAX_TARGET = 2000
#: Failed sign-ins of a client are counted in windows of this length (a fixed window).
LOGIN_WINDOW_SECONDS = 60
#: Clients tracked at once; past it a new client's failed sign-ins are refused until the
#: oldest windows end (memory stays bounded under a flood from many addresses).
MAX_TRACKED_CLIENTS = 100_000

#: Every answer's headers: no framing (clickjacking), no content sniffing, no referrer
#: (a page's URL names campaigns and items), and only this origin's scripts and styles.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
        "object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class AccessSettings:
    """The sign-in's settings (LDPTEL_DASHBOARD_* in docs/operations.md)."""

    #: A session ends this long after sign-in (absolute expiry).
    session_seconds: int = 8 * 3600
    #: Failed sign-ins per client per LOGIN_WINDOW_SECONDS.
    login_attempts: int = 10
    #: Addresses of reverse proxies whose X-Forwarded-Proto and X-Forwarded-For are believed.
    trusted_proxies: frozenset[str] = field(default_factory=frozenset)


def same_origin_path(target: str) -> str | None:
    """`target` if a browser can only read it as a path of this site, else None.

    Refused: anything not starting with one `/` (`//evil`, `https://evil`), any backslash
    (browsers read `/\\evil` as `//evil`), and any control or white-space character, also
    once percent-decoded (browsers drop a tab or newline: `/%09/evil` became `//evil`)."""
    if not 0 < len(target) <= MAX_TARGET:
        return None
    decoded, previous = target, ""
    while decoded != previous:  # %252F is %2F is /
        previous, decoded = decoded, unquote(decoded)
    for text in (target, decoded):
        if not text.startswith("/") or text[1:2] == "/" or "\\" in text:
            return None
        if any(not c.isprintable() or c.isspace() for c in text):
            return None
    parts = urlsplit(target)
    return target if not (parts.scheme or parts.netloc) else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Sessions:
    """Browser sessions in Redis: the SHA-256 of the cookie's random id, with a TTL."""

    def __init__(self, client: RedisClient, seconds: int) -> None:
        self.client = client
        self.seconds = seconds

    def open(self) -> str:
        session = secrets.token_urlsafe(32)
        self.client.set(keys.dashboard_session(_digest(session)), 1, ex=self.seconds)
        return session

    def is_open(self, session: str) -> bool:
        if not 0 < len(session) <= 100:
            return False
        return bool(self.client.exists(keys.dashboard_session(_digest(session))))

    def close(self, session: str) -> None:
        if 0 < len(session) <= 100:
            self.client.delete(keys.dashboard_session(_digest(session)))


class LoginThrottle:
    """At most `attempts` failed sign-ins per client in each LOGIN_WINDOW_SECONDS.

    A client is known by an HMAC of its address under a key drawn at start and never
    written anywhere, kept in memory until its window ends: no address is stored or logged.
    Per process (a dashboard with N workers allows N times as many)."""

    def __init__(self, attempts: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.attempts = attempts
        self.clock = clock
        self.key = secrets.token_bytes(32)
        self.failures: dict[bytes, tuple[float, int]] = {}  # client -> (window end, count)
        self.lock = threading.Lock()

    def _client(self, address: str) -> bytes:
        return hmac.digest(self.key, address.encode(), "sha256")

    def _forget_ended(self, now: float) -> None:
        for client in [c for c, (end, _) in self.failures.items() if end <= now]:
            del self.failures[client]

    def retry_after(self, address: str) -> int:
        """Seconds until `address` may try again (0: it may now)."""
        now = self.clock()
        client = self._client(address)
        with self.lock:
            end, count = self.failures.get(client, (0.0, 0))
            if end > now:
                return math.ceil(end - now) if count >= self.attempts else 0
            if len(self.failures) >= MAX_TRACKED_CLIENTS:
                self._forget_ended(now)
            # No room to count one more client: refuse it (bounded memory beats a guess).
            return LOGIN_WINDOW_SECONDS if len(self.failures) >= MAX_TRACKED_CLIENTS else 0

    def failed(self, address: str) -> None:
        now = self.clock()
        client = self._client(address)
        with self.lock:
            end, count = self.failures.get(client, (0.0, 0))
            if end <= now:
                if client not in self.failures and len(self.failures) >= MAX_TRACKED_CLIENTS:
                    return
                end, count = now + LOGIN_WINDOW_SECONDS, 0
            self.failures[client] = (end, count + 1)
