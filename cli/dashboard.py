"""`ldptel dashboard`: the analysts' dashboard over the collector's Redis (docs/dashboard.md).

Read-only. It serves on loopback by default; on any other address it needs the analyst token
($LDPTEL_ANALYST_TOKEN, the one the collector's report API takes), which every request must
then carry (a browser signs in once at /login). Served by gunicorn on the collector's gevent
worker, with the collector's timeouts.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ldptel.cli.redis_option import add_redis_argument, redis_client
from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the dashboard needs the [server] extra: imported when run
    from ldptel.dashboard.access import AccessSettings

HOST_VARIABLE = "LDPTEL_DASHBOARD_HOST"
PORT_VARIABLE = "LDPTEL_DASHBOARD_PORT"
TOKEN_VARIABLE = "LDPTEL_ANALYST_TOKEN"
SESSION_VARIABLE = "LDPTEL_DASHBOARD_SESSION_SECONDS"
ATTEMPTS_VARIABLE = "LDPTEL_DASHBOARD_LOGIN_ATTEMPTS"
PROXIES_VARIABLE = "LDPTEL_DASHBOARD_TRUSTED_PROXIES"
WORKERS_VARIABLE = "LDPTEL_DASHBOARD_WORKERS"
CONNECTIONS_VARIABLE = "LDPTEL_DASHBOARD_CONNECTIONS"
#: The only body the dashboard reads is the login form.
MAX_BODY_BYTES = 16 * 1024
BODY_TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_redis_argument(parser)
    parser.add_argument(
        "--host",
        default=os.environ.get(HOST_VARIABLE, "127.0.0.1"),
        help=f"address to bind (default ${HOST_VARIABLE}, else 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=os.environ.get(PORT_VARIABLE, "8090"),  # a string: argparse checks it
        help=f"port (default ${PORT_VARIABLE}, else 8090; 0 = a free one)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.environ.get(WORKERS_VARIABLE, "2"),
        help=f"worker processes (default ${WORKERS_VARIABLE}, else 2)",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=os.environ.get(CONNECTIONS_VARIABLE, "1000"),
        help="open connections per worker, idle ones included; an idle one is closed after "
        f"5 s (default ${CONNECTIONS_VARIABLE}, else 1000)",
    )
    parser.add_argument(
        "--session-seconds",
        type=int,
        default=os.environ.get(SESSION_VARIABLE, "28800"),
        help=f"a browser's sign-in lasts this long (default ${SESSION_VARIABLE}, else 8 h)",
    )
    parser.add_argument(
        "--login-attempts",
        type=int,
        default=os.environ.get(ATTEMPTS_VARIABLE, "10"),
        help=f"failed sign-ins per client per minute (default ${ATTEMPTS_VARIABLE}, else 10)",
    )
    parser.add_argument(
        "--trusted-proxies",
        metavar="ADDRESSES",
        default=os.environ.get(PROXIES_VARIABLE, ""),
        help="comma-separated addresses of reverse proxies whose X-Forwarded-Proto and "
        f"X-Forwarded-For are believed (default ${PROXIES_VARIABLE}, else none)",
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def access_settings(args: argparse.Namespace) -> AccessSettings:
    """The sign-in's settings, checked: a bad one is an error naming its option."""
    from ldptel.dashboard.access import AccessSettings

    if args.session_seconds < 1:
        raise ParameterError("session-seconds", "must be at least 1")
    if args.login_attempts < 1:
        raise ParameterError("login-attempts", "must be at least 1")
    proxies = frozenset(p.strip() for p in args.trusted_proxies.split(",") if p.strip())
    for proxy in proxies:
        try:
            ipaddress.ip_address(proxy)
        except ValueError:
            raise ParameterError("trusted-proxies", f"not an IP address: {proxy!r}") from None
    return AccessSettings(args.session_seconds, args.login_attempts, proxies)


def analyst_token(environ: Mapping[str, str]) -> str | None:
    """$LDPTEL_ANALYST_TOKEN, or the file $LDPTEL_ANALYST_TOKEN_FILE names (as the collector
    reads it), refused when weak (collector/settings.py, check_secret)."""
    from ldptel.collector.settings import check_secret, read_secret_file

    token = environ.get(TOKEN_VARIABLE) or None
    path = environ.get(f"{TOKEN_VARIABLE}_FILE") or None
    if token is not None and path is not None:
        raise ParameterError(
            TOKEN_VARIABLE, f"set {TOKEN_VARIABLE} or {TOKEN_VARIABLE}_FILE, not both"
        )
    if path is not None:
        token = read_secret_file(f"{TOKEN_VARIABLE}_FILE", path)
    if token is not None:
        check_secret(TOKEN_VARIABLE, token)
    return token


def run(args: argparse.Namespace) -> int:
    """Serve under gunicorn on the collector's gevent worker (collector/serve.py): the same
    timeouts, an idle connection costs a greenlet, errors are JSON (414 and 431 too)."""
    from ldptel.collector.serve import GeventApplication, ServeOptions, run_application
    from ldptel.collector.worker import BodyLimits
    from ldptel.dashboard import create_app

    token = analyst_token(os.environ)
    if token is None and not is_loopback(args.host):
        raise ParameterError("host", f"beyond loopback only with {TOKEN_VARIABLE} set")
    access = access_settings(args)
    if args.workers < 1 or args.connections < 1:
        raise ParameterError("workers" if args.workers < 1 else "connections", "must be >= 1")
    redis_client(args.redis_url).ping()  # a wrong URL is an error here, not in each worker

    def load() -> object:  # in each worker, after the fork: its own pool and warm thread
        client = redis_client(args.redis_url)
        return create_app(client, analyst_token=token, warm=True, access=access)

    options = ServeOptions(args.host, args.port, args.workers, args.connections)
    # gunicorn believes X-Forwarded-Proto from the same proxies only (its default: loopback).
    proxies = ",".join(sorted(access.trusted_proxies))
    settings = {"when_ready": announce, "forwarded_allow_ips": proxies}
    limits = BodyLimits(BODY_TIMEOUT_SECONDS, MAX_BODY_BYTES)
    application = GeventApplication(
        load, options, limits, name="ldptel-dashboard", settings=settings
    )
    return run_application(application)


def announce(server: Any) -> None:
    """The address actually bound (port 0 picks one), for people and tests."""
    for listener in server.LISTENERS:
        print(f"dashboard on {listener}/", file=sys.stderr, flush=True)
