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

from ldptel.cli.redis_option import add_redis_argument, redis_client
from ldptel.client.errors import ParameterError

HOST_VARIABLE = "LDPTEL_DASHBOARD_HOST"
PORT_VARIABLE = "LDPTEL_DASHBOARD_PORT"
TOKEN_VARIABLE = "LDPTEL_ANALYST_TOKEN"


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from ldptel.cli.demo import sigterm_as_interrupt
    from ldptel.dashboard import create_app

    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not is_loopback(args.host):
        raise ParameterError("host", f"beyond loopback only with {TOKEN_VARIABLE} set")
    app = create_app(redis_client(args.redis_url), analyst_token=token, warm=True)
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
