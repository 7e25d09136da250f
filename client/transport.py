"""HTTP to the collector (docs/openapi.yaml): post a batch, fetch a campaign config.

Every answer becomes a plain outcome; nothing here raises into the sender for a collector
that is down, slow or answering garbage.
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

import requests

from ldptel.client.clock import parse_date

#: Statuses worth retrying besides 5xx: request timeout, too many requests.
RETRYABLE_4XX = frozenset({408, 429})
#: A Retry-After beyond this is not believed (a misconfigured proxy must not park us for days).
MAX_RETRY_AFTER = 3600.0

Verdict = Literal["delivered", "retry", "reject", "too_large"]


@dataclass(frozen=True)
class Outcome:
    """What became of one POST /v1/reports."""

    verdict: Verdict
    status: int | None
    reason: str
    retry_after: float | None = None


@dataclass(frozen=True)
class ConfigAnswer:
    """What GET /v1/campaigns/<name> said: `body` (the JSON object) on 200, None otherwise."""

    status: int | None
    body: dict[str, Any] | None = None
    reason: str = ""


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


def _reason(response: requests.Response) -> str:
    """The collector's {"error": {"field", "reason"}} if it sent one, else the status text."""
    try:
        error = response.json().get("error", {})
        return f"{error.get('field', '?')}: {error.get('reason', '?')}"[:300]
    except (ValueError, AttributeError):
        return f"HTTP {response.status_code} {response.reason or ''}".strip()


class Transport:
    """One requests.Session to the collector (re-created after a fork)."""

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
        self.session = requests.Session()

    def reset(self) -> None:
        """A fresh session (the parent's pooled sockets must not be shared after fork)."""
        self.session = requests.Session()

    def post_batch(
        self, campaign: str, config_id: str, key: str, reports: list[str], level: str = ""
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
        try:
            response = self.session.post(
                f"{self.url}/v1/reports",
                data=gzip.compress(body, compresslevel=6),
                headers=headers,
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.RequestException as error:
            return Outcome("retry", None, f"network: {type(error).__name__}")
        self.on_date(parse_date(response.headers.get("Date")))
        return self._classify(response, len(reports))

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
        return Outcome("reject", status, _reason(response))

    def fetch_config(self, name: str, etag: str | None) -> ConfigAnswer:
        """GET /v1/campaigns/<name>, conditional on the cached config id (ETag)."""
        headers = dict(self._headers)
        if etag:
            headers["If-None-Match"] = f'"{etag}"'
        try:
            response = self.session.get(
                f"{self.url}/v1/campaigns/{name}", headers=headers, timeout=self.timeout
            )
        except requests.RequestException as error:
            return ConfigAnswer(None, reason=f"network: {type(error).__name__}")
        self.on_date(parse_date(response.headers.get("Date")))
        if response.status_code != 200:
            return ConfigAnswer(response.status_code, reason=_reason(response))
        try:
            body = response.json()
        except ValueError:
            return ConfigAnswer(200, reason="not JSON")
        if not isinstance(body, dict):
            return ConfigAnswer(200, reason="not a JSON object")
        return ConfigAnswer(200, body)
