"""HTTP to the collector (docs/openapi.yaml): post a batch, fetch a campaign config.

Every answer becomes a plain outcome; nothing here raises into the sender for a collector
that is down, slow or answering garbage. Every call has a total deadline (connect, every read
and every redirect followed: a read timeout alone is per read, and a server trickling a byte
a second never trips it), and redirects are followed only within the collector's origin
(scheme, host, port), so the token is never sent anywhere else.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

import requests

from ldptel.client.clock import parse_date
from ldptel.client.deadline import DeadlinePassed, new_session, send_before
from ldptel.client.errors import (
    CollectorUrlError,
    DeliveryError,
    RedirectNotFollowedError,
    TokenRefusedError,
)

#: Statuses worth retrying besides 5xx: request timeout, too many requests.
RETRYABLE_4XX = frozenset({408, 429})
#: A Retry-After beyond this is not believed (a misconfigured proxy must not park us for days).
MAX_RETRY_AFTER = 3600.0

#: Redirects followed in one call, each within the collector's origin.
MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: The redirects that keep a POST a POST with its body (RFC 9110, 15.4.8 and 15.4.9); a
#: 301, 302 or 303 would turn it into a GET.
KEEPS_METHOD = frozenset({307, 308})
#: The collector's own error fields for a request that reached it at the wrong place (its
#: 404 and 405 for an unknown route): the URL is wrong, not the reports.
URL_FIELDS = frozenset({"path", "method"})
TOKEN_STATUSES = frozenset({401, 403})

#: "token": the collector refused the ingest token (the sender keeps the batch for
#: `auth_wait` seconds, for a fixed token).
Verdict = Literal["delivered", "retry", "reject", "too_large", "token"]


@dataclass(frozen=True)
class Outcome:
    """What became of one POST /v1/reports."""

    verdict: Verdict
    status: int | None
    reason: str
    retry_after: float | None = None
    #: For an answer retrying alone will not get past (a redirect not followed, a refused
    #: token, an answer that is not the collector's): the error for the app's on_error.
    problem: DeliveryError | None = None


@dataclass(frozen=True)
class ConfigAnswer:
    """What GET /v1/campaigns/<name> said: `body` (the JSON object) on 200, None otherwise."""

    status: int | None
    body: dict[str, Any] | None = None
    reason: str = ""
    problem: DeliveryError | None = None


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Exponential backoff with full jitter (uniform in [0, min(cap, base * 2^attempt)]),
    but never sooner than the server's Retry-After."""
    delay = random.uniform(0.0, min(cap, base * 2.0 ** min(attempt, 62)))
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
    return delay


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP-date; None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _collector_error(response: requests.Response) -> tuple[str, str] | None:
    """(field, reason) of the collector's {"error": {"field", "reason"}}; None if the answer
    is not one (a proxy's or a web server's page)."""
    try:
        error = response.json()["error"]
        field, reason = error["field"], error["reason"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(field, str) or not isinstance(reason, str):
        return None
    return field[:100], reason[:300]


def _reason(response: requests.Response) -> str:
    """The collector's "field: reason" if it sent one, else the status text."""
    error = _collector_error(response)
    if error is not None:
        return f"{error[0]}: {error[1]}"
    return f"HTTP {response.status_code} {response.reason or ''}".strip()


def _problem(response: requests.Response) -> DeliveryError | None:
    """The error for an answer that retrying alone will not get past: a refused token, or a
    4xx that is not the collector's refusal of this request (a wrong URL or proxy)."""
    status = response.status_code
    if status in TOKEN_STATUSES:
        return TokenRefusedError(
            "token",
            f"the collector refused the ingest token (HTTP {status}, {_reason(response)}): "
            "check the token the Reporter is given and that the collector knows it",
            status,
        )
    if status < 300 or status >= 500 or status in RETRYABLE_4XX or status == 413:
        return None
    error = _collector_error(response)
    if error is not None and error[0] not in URL_FIELDS:
        return None
    return CollectorUrlError(
        "collector_url",
        f"HTTP {status} ({_reason(response)}) is not the collector's answer: check "
        "collector_url and any proxy before the collector",
        status,
    )


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL; None for anything else, or a URL with user
    info (never the same origin as the collector's)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host or parts.username or parts.password:
        return None
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


def _where(url: str) -> str:
    """A redirect's target for a message: its origin only (never its path or query)."""
    found = origin(url)
    if found is None:
        return "a URL that is not http(s)"
    scheme, host, port = found
    return f"{scheme}://{host}:{port}"


class Transport:
    """One requests.Session to the collector (re-created after a fork). Each call is bounded
    by `timeout` seconds in total, or by the `deadline` (time.monotonic()) it is given."""

    def __init__(
        self,
        collector_url: str,
        token: str,
        *,
        timeout: float,
        on_date: Callable[[float | None], None] = lambda date: None,
    ) -> None:
        self.url = collector_url.rstrip("/")
        self.timeout = timeout
        #: Called with every answer's Date header (ldptel.client.clock: the ledger's windows).
        self.on_date = on_date
        self._headers = {"Authorization": f"Bearer {token}", "User-Agent": "ldptel-client"}
        self.session = new_session()

    def reset(self) -> None:
        """A fresh session (the parent's pooled sockets must not be shared after fork)."""
        self.session = new_session()

    def post_batch(
        self,
        campaign: str,
        config_id: str,
        key: str,
        reports: list[str],
        level: str = "",
        deadline: float | None = None,
    ) -> Outcome:
        """POST one gzipped batch (of one privacy level, "" = none) under its idempotency key;
        classify the answer."""
        envelope = {"campaign": campaign, "config_id": config_id}
        if level:  # absent without levels: the envelope older collectors know (openapi.yaml)
            envelope["level"] = level
        head = json.dumps(envelope, separators=(",", ":"))
        body = f'{head[:-1]},"reports":[{",".join(reports)}]}}'.encode()
        headers = {
            **self._headers,
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Idempotency-Key": key,
        }
        compressed = gzip.compress(body, compresslevel=6)
        try:
            answer = self._exchange("POST", "/v1/reports", headers, deadline, compressed)
        except requests.RequestException as error:
            return Outcome("retry", None, self._network(error))
        if isinstance(answer, DeliveryError):
            return Outcome("retry", answer.status, answer.reason, problem=answer)
        return self._classify(answer, len(reports))

    def _classify(self, response: requests.Response, sent: int) -> Outcome:
        status = response.status_code
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        if 200 <= status < 300:
            # A 2xx must be the collector's own answer (not a captive portal's page): the
            # batch is forgotten only when it says it holds all of it.
            try:
                accepted = response.json().get("accepted")
            except (ValueError, AttributeError):
                accepted = None
            if accepted == sent:
                return Outcome("delivered", status, "")
            return Outcome("retry", status, "2xx without the collector's answer")
        if status >= 500 or status in RETRYABLE_4XX:
            return Outcome("retry", status, _reason(response), retry_after)
        if status == 413:
            return Outcome("too_large", status, _reason(response))
        problem = _problem(response)
        if problem is not None:
            verdict: Verdict = "token" if isinstance(problem, TokenRefusedError) else "retry"
            return Outcome(verdict, status, problem.reason, retry_after, problem)
        return Outcome("reject", status, _reason(response))

    def fetch_config(
        self, name: str, etag: str | None, deadline: float | None = None
    ) -> ConfigAnswer:
        """GET /v1/campaigns/<name>, conditional on the cached config id (ETag)."""
        headers = dict(self._headers)
        if etag:
            headers["If-None-Match"] = f'"{etag}"'
        try:
            response = self._exchange("GET", f"/v1/campaigns/{name}", headers, deadline)
        except requests.RequestException as error:
            return ConfigAnswer(None, reason=self._network(error))
        if isinstance(response, DeliveryError):
            return ConfigAnswer(response.status, reason=response.reason, problem=response)
        if response.status_code != 200:
            problem = None if response.status_code == 304 else _problem(response)
            reason = problem.reason if problem is not None else _reason(response)
            return ConfigAnswer(response.status_code, reason=reason, problem=problem)
        try:
            body = response.json()
        except ValueError:
            return ConfigAnswer(200, reason="not JSON")
        if not isinstance(body, dict):
            return ConfigAnswer(200, reason="not a JSON object")
        return ConfigAnswer(200, body)

    def _exchange(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        deadline: float | None,
        body: bytes | None = None,
    ) -> requests.Response | RedirectNotFollowedError:
        """The answer to `method path`, through the redirects within the collector's origin,
        all under one deadline; the error for a redirect not followed. Raises
        requests.RequestException (DeadlinePassed once the deadline has passed)."""
        until = time.monotonic() + self.timeout if deadline is None else deadline
        url, home = self.url + path, origin(self.url)
        for _ in range(MAX_REDIRECTS + 1):
            response = send_before(until, self.session, method, url, headers, body)
            self.on_date(parse_date(response.headers.get("Date")))
            status = response.status_code
            if status not in REDIRECTS:
                return response
            location = response.headers.get("Location")
            said = f"the collector_url answered HTTP {status}"
            if not location:
                return RedirectNotFollowedError(
                    "collector_url", f"{said} without a Location", status
                )
            target = urljoin(url, location)
            if home is None or origin(target) != home:
                return RedirectNotFollowedError(
                    "collector_url",
                    f"{said} to another origin ({_where(target)}): not followed, so the token "
                    "is not sent there; set collector_url to the collector's own URL",
                    status,
                )
            if method != "GET" and status not in KEEPS_METHOD:
                return RedirectNotFollowedError(
                    "collector_url",
                    f"{said}, which would turn the POST into a GET: not followed (a proxy "
                    "before the collector must pass POSTs through, or answer 307 or 308)",
                    status,
                )
            url = target
        return RedirectNotFollowedError(
            "collector_url", f"more than {MAX_REDIRECTS} redirects (a loop?): not followed", status
        )

    def _network(self, error: requests.RequestException) -> str:
        if isinstance(error, DeadlinePassed):
            return f"network: no complete answer within the {self.timeout:g} s timeout"
        return f"network: {type(error).__name__}"
