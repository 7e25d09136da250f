"""`ldptel collector`: run the collector, and manage ingest tokens and campaigns.

    ldptel collector serve [--host H] [--port P] [--redis-url URL] [--workers N] [--connections N]
        [--body-timeout SECONDS]
    ldptel collector token create APP        (prints the token once)
    ldptel collector token revoke TOKEN
    ldptel collector campaign create FILE    (a config JSON file)
    ldptel collector campaign retire NAME

Token and campaign commands talk to Redis directly: --redis-url, else $LDPTEL_REDIS_URL,
else the private Redis of a `serve` running in this directory (.ldptel/redis.url).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ldptel.store.connection import RedisClient


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    serve = sub.add_parser("serve", help="run the collector under gunicorn")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    serve.add_argument(
        "--redis-url",
        default=os.environ.get("LDPTEL_REDIS_URL"),
        help="Redis to store into, redis+cluster://host:port[,host:port...] for a Redis "
        "Cluster (default $LDPTEL_REDIS_URL, else a private redis-server with its data in "
        "./.ldptel/redis)",
    )
    serve.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    serve.add_argument(
        "--connections",
        type=int,
        default=1000,
        metavar="N",
        help="open connections per worker, slow and idle ones included (default 1000)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a request body not received in full within this time gets 408 (default 10)",
    )
    serve.add_argument(
        "--admin-token",
        default=os.environ.get("LDPTEL_ADMIN_TOKEN"),
        help="admin token (default $LDPTEL_ADMIN_TOKEN; if unset, a random one is printed)",
    )
    serve.add_argument(
        "--analyst-token",
        default=os.environ.get("LDPTEL_ANALYST_TOKEN"),
        help="token that may read window reports (default $LDPTEL_ANALYST_TOKEN; none: admin only)",
    )
    serve.add_argument(
        "--rate-limit",
        type=int,
        default=1000,
        metavar="N",
        help="requests per second per ingest token (0 = unlimited; default 1000)",
    )

    token = sub.add_parser("token", help="create or revoke an app's ingest token")
    token_sub = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    create = token_sub.add_parser("create", help="create an ingest token (printed once)")
    create.add_argument("app", help="the app's name")
    revoke = token_sub.add_parser("revoke", help="revoke an ingest token")
    revoke.add_argument("token")

    campaign = sub.add_parser("campaign", help="create or retire a campaign")
    campaign_sub = campaign.add_subparsers(dest="campaign_action", metavar="ACTION", required=True)
    make = campaign_sub.add_parser("create", help="store a config and make it active")
    make.add_argument("file", type=Path, help="campaign config JSON (docs/protocol.md)")
    retire = campaign_sub.add_parser("retire", help="reject all reports of a campaign")
    retire.add_argument("name")

    for command in (create, revoke, make, retire):
        command.add_argument("--redis-url", default=None, help="Redis of the collector")


def run(args: argparse.Namespace) -> int:
    if args.action == "serve":
        return _serve(args)
    from ldptel.cli.main import CliError
    from ldptel.store.connection import REDIS_ERRORS

    try:
        return _token(args) if args.action == "token" else _campaign(args)
    except REDIS_ERRORS as error:
        raise CliError(f"Redis: {error}") from error


def _serve(args: argparse.Namespace) -> int:
    from ldptel.collector.serve import ServeOptions, serve
    from ldptel.collector.settings import CollectorConfig

    admin_token = args.admin_token
    if not admin_token:
        admin_token = secrets.token_urlsafe(24)
        print(f"ldptel collector: admin token for this run: {admin_token}", file=sys.stderr)
    config = CollectorConfig(
        admin_token=admin_token,
        analyst_token=args.analyst_token,
        rate_limit=args.rate_limit,
        body_timeout_seconds=args.body_timeout,
    ).checked()
    options = ServeOptions(
        host=args.host, port=args.port, workers=args.workers, connections=args.connections
    )
    return serve(config, options, redis_url=args.redis_url)


def _redis(url: str | None) -> RedisClient:
    from ldptel.cli.main import CliError
    from ldptel.collector.serve import DATA_DIR, REDIS_URL_FILE

    url = url or os.environ.get("LDPTEL_REDIS_URL")
    url_file = DATA_DIR / REDIS_URL_FILE
    if not url and url_file.exists():
        url = url_file.read_text().strip()
    if not url:
        raise CliError(
            "no Redis: pass --redis-url, set LDPTEL_REDIS_URL, or run `ldptel collector serve` "
            "in this directory"
        )
    from ldptel.store.connection import connect

    return connect(url)


def _token(args: argparse.Namespace) -> int:
    from ldptel.cli.main import CliError
    from ldptel.collector.auth import create_token, revoke_token
    from ldptel.collector.errors import ApiError

    client = _redis(args.redis_url)
    if args.token_action == "create":
        try:
            print(create_token(client, args.app))
        except ApiError as error:
            raise CliError(f"{error.field}: {error.reason}") from error
        return 0
    if not revoke_token(client, args.token):
        raise CliError("no such token")
    print("revoked")
    return 0


def _campaign(args: argparse.Namespace) -> int:
    from ldptel.cli.main import CliError
    from ldptel.client.campaign import CampaignConfig
    from ldptel.store.registry import CampaignRetiredError, Registry

    registry = Registry(_redis(args.redis_url))
    if args.campaign_action == "retire":
        if not registry.retire(args.name):
            raise CliError(f"unknown campaign {args.name!r}")
        print(f"retired {args.name}")
        return 0
    try:
        data = json.loads(args.file.read_text())
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read {args.file}: {error}") from error
    config = CampaignConfig.from_dict(data)
    try:
        config_id, changed = registry.create(config)
    except CampaignRetiredError as error:
        raise CliError(f"campaign {config.name!r} is retired; choose a new name") from error
    print(json.dumps({"name": config.name, "config_id": config_id, "changed": changed}))
    return 0
