"""`ldptel dashboard`: the analysts' dashboard over the collector's Redis (docs/dashboard.md).

Read-only. It serves on loopback by default; on any other address it needs the analyst token
($LDPTEL_ANALYST_TOKEN, the one the collector's report API takes), which every request must
then carry (a browser signs in once at /login).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import TYPE_CHECKING

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


def run(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from ldptel.cli.demo import sigterm_as_interrupt
    from ldptel.dashboard import create_app

    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not is_loopback(args.host):
        raise ParameterError("host", f"beyond loopback only with {TOKEN_VARIABLE} set")
    access = access_settings(args)
    app = create_app(redis_client(args.redis_url), analyst_token=token, warm=True, access=access)
    server = make_server(args.host, args.port, app, threaded=True)
    print(f"dashboard on http://{args.host}:{server.server_port}/", file=sys.stderr, flush=True)
    try:
        with sigterm_as_interrupt():
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
