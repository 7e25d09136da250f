"""CORS for browser clients (the TypeScript SDK in a web page; docs/client-js.md).

Only the two paths an ingest client uses are shared with other origins: `POST /v1/reports`
and `GET /v1/campaigns/<name>`. An origin listed in `cors_origins` (`LDPTEL_CORS_ORIGINS`,
comma-separated, or `*`) gets `Access-Control-Allow-Origin` with its own name (`Vary:
Origin`), never `Access-Control-Allow-Credentials`: the ingest token travels in the
`Authorization` header, which the page sets itself, so no cookie is ever sent or needed. A
preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 with the methods
and headers the client sends; an origin not listed gets no CORS header, so the browser keeps
the answer from the page (Fetch standard, "CORS protocol").
"""

from __future__ import annotations

import re

from flask import Flask, Response, request

#: Paths a browser client calls.
_SHARED = re.compile(r"/v1/reports|/v1/campaigns/[^/]+")
#: What the SDK sends beyond the CORS-safelisted request headers.
ALLOW_HEADERS = "Authorization, Content-Type, Content-Encoding, Idempotency-Key, If-None-Match"
#: What the SDK reads beyond the safelisted response headers: the collector's clock (the
#: ledger's windows), the config id and the retry time.
EXPOSE_HEADERS = "Date, ETag, Retry-After"
#: How long a browser may cache a preflight answer (Chromium caps it at 2 hours).
MAX_AGE_SECONDS = 7200


def parse_origins(setting: str) -> frozenset[str]:
    """`https://a.example, https://b.example` -> the set of origins; `*` allows any."""
    return frozenset(part.strip().rstrip("/") for part in setting.split(",") if part.strip())


def register_cors(app: Flask, setting: str) -> None:
    """Answer preflights (204, with CORS headers for the allowed origins only) and add the
    CORS headers (and `Vary: Origin`) to the answers to allowed origins; with no origin
    configured, only the preflights."""
    origins = parse_origins(setting)

    def allowed() -> str | None:
        origin = request.headers.get("Origin")
        if origin is None or not _SHARED.fullmatch(request.path):
            return None
        return origin if "*" in origins or origin in origins else None

    @app.before_request
    def preflight() -> Response | None:
        if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
            return None
        response = Response(status=204)
        if allowed() is not None:
            response.headers["Access-Control-Allow-Methods"] = "GET, POST"
            response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
            response.headers["Access-Control-Max-Age"] = str(MAX_AGE_SECONDS)
        return response

    if not origins:  # no origin is ever allowed: the answers need no CORS header at all
        return

    @app.after_request
    def add_headers(response: Response) -> Response:
        origin = allowed()
        if origin is not None:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        if _SHARED.fullmatch(request.path):
            response.vary.add("Origin")
        return response
