"""`ldptel collector`: run the collector, and manage ingest tokens and campaigns.

    ldptel collector serve [--host H] [--port P] [--redis-url URL] [--workers N] [--connections N]
        [--body-timeout SECONDS]
    ldptel collector token create APP        (prints the token once)
    ldptel collector token list              (id and app of every token; never the token)
    ldptel collector token revoke (TOKEN | --id ID | --app APP)
    ldptel collector campaign create FILE    (a config JSON file)
    ldptel collector campaign list
    ldptel collector campaign retire NAME

Each token and campaign command takes `--json` (campaign create always prints JSON).

Every setting of `serve` also comes from the environment (`LDPTEL_<SETTING>`; a flag wins;
docs/operations.md); the admin and analyst tokens only from `LDPTEL_ADMIN_TOKEN[_FILE]` and
`LDPTEL_ANALYST_TOKEN[_FILE]`, never from a flag (`ps` shows flags). Token and campaign
commands talk to Redis directly, found as every command finds it (cli/redis_option.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ldptel.cli.redis_option import add_redis_argument, redis_client

if TYPE_CHECKING:
    from ldptel.store.registry import Registry

log = logging.getLogger("ldptel.collector")
#: The admin token `serve` generates when none is given: written to this file in the data
#: directory (owner-only), never logged.
ADMIN_TOKEN_FILE = "admin-token"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the collector under gunicorn",
        description="Run the collector under gunicorn. The admin and analyst tokens come from "
        "$LDPTEL_ADMIN_TOKEN / $LDPTEL_ADMIN_TOKEN_FILE and $LDPTEL_ANALYST_TOKEN / "
        "$LDPTEL_ANALYST_TOKEN_FILE, never from a flag; every setting has an LDPTEL_* "
        "variable and $GUNICORN_CMD_ARGS passes gunicorn settings (docs/operations.md).",
    )
    serve.add_argument("--host", help="address to bind ($LDPTEL_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port ($LDPTEL_PORT, else 8080)")
    serve.add_argument(
        "--redis-url",
        metavar="URL",
        help="Redis to store into, redis+cluster://host:port[,host:port...] for a Redis "
        "Cluster ($LDPTEL_REDIS_URL, else a private redis-server with its data in "
        "<data dir>/redis)",
    )
    serve.add_argument("--workers", type=int, help="worker processes ($LDPTEL_WORKERS, else 2)")
    serve.add_argument(
        "--connections",
        type=int,
        metavar="N",
        help="open connections per worker, slow and idle ones included ($LDPTEL_CONNECTIONS, "
        "else 1000)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help="a request body not received in full within this time gets 408 "
        "($LDPTEL_BODY_TIMEOUT_SECONDS, else 10)",
    )
    serve.add_argument(
        "--rate-limit",
        type=int,
        metavar="N",
        help="requests per ingest token and campaign per $LDPTEL_RATE_LIMIT_SECONDS (default 1 s) "
        "window (0 = unlimited; $LDPTEL_RATE_LIMIT, else 1000)",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        help="where the private Redis and a generated admin token live ($LDPTEL_DATA_DIR, "
        "else ./.ldptel)",
    )

    token = sub.add_parser("token", help="create, list or revoke ingest tokens")
    token_sub = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    create = token_sub.add_parser("create", help="create an ingest token (printed once)")
    create.add_argument("app", help="the app's name")
    listing = token_sub.add_parser("list", help="every token's id and app (never the token)")
    revoke = token_sub.add_parser("revoke", help="revoke an ingest token")
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("token", nargs="?", help="the token itself")
    which.add_argument("--id", help="a token id from `token list` (or a unique prefix of it)")
    which.add_argument("--app", help="revoke every token of this app")

    campaign = sub.add_parser("campaign", help="create, list or retire campaigns")
    campaign_sub = campaign.add_subparsers(dest="campaign_action", metavar="ACTION", required=True)
    make = campaign_sub.add_parser("create", help="store a config and make it active")
    make.add_argument("file", type=Path, help="campaign config JSON (docs/protocol.md)")
    campaigns = campaign_sub.add_parser("list", help="every campaign: state, oracle, config")
    retire = campaign_sub.add_parser("retire", help="reject all reports of a campaign")
    retire.add_argument("name")

    for command in (create, listing, revoke, make, campaigns, retire):
        add_redis_argument(command)
        command.add_argument("--json", action="store_true", help="print the result as JSON")


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
    from dataclasses import replace

    from ldptel.collector.serve import ServeOptions, serve
    from ldptel.collector.settings import CollectorConfig, from_env
    from ldptel.store import logs

    logs.configure()
    config = CollectorConfig.from_environ(os.environ)
    if args.rate_limit is not None:
        config = replace(config, rate_limit=args.rate_limit).checked()
    if args.body_timeout is not None:
        config = replace(config, body_timeout_seconds=args.body_timeout).checked()
    flags = {
        name: value
        for name in ("host", "port", "workers", "connections", "data_dir")
        if (value := getattr(args, name)) is not None
    }
    options = replace(from_env(ServeOptions, os.environ, ServeOptions()), **flags)
    if config.admin_token is None:
        options.data_dir.mkdir(parents=True, exist_ok=True)
        config = replace(config, admin_token=_generated_admin_token(options.data_dir))
    redis_url = args.redis_url or os.environ.get("LDPTEL_REDIS_URL") or None
    return serve(config, options, redis_url=redis_url)


def _generated_admin_token(data_dir: Path) -> str:
    """A random admin token in `data_dir`/admin-token (owner-only), for a first try without
    LDPTEL_ADMIN_TOKEN; the log names the file, never the token."""
    path = data_dir / ADMIN_TOKEN_FILE
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    log.warning("no LDPTEL_ADMIN_TOKEN or LDPTEL_ADMIN_TOKEN_FILE: admin token written to %s", path)
    return token


def _token(args: argparse.Namespace) -> int:
    from ldptel.cli.main import CliError
    from ldptel.collector.auth import create_token, list_tokens, revoke_digest, token_hash
    from ldptel.collector.errors import ApiError

    client = redis_client(args.redis_url)
    if args.token_action == "create":
        try:
            token = create_token(client, args.app)
        except ApiError as error:
            raise CliError(f"{error.field}: {error.reason}") from error
        created = {"app": args.app, "id": token_hash(token)[:12], "token": token}
        print(json.dumps(created) if args.json else token)
        return 0
    if args.token_action == "list":
        records = list_tokens(client)
        if args.json:
            print(json.dumps({"tokens": [{"id": r.id, "app": r.app} for r in records]}))
        else:
            print("".join(f"{record.id}  {record.app}\n" for record in records), end="")
        return 0
    if args.token:
        digests = [token_hash(args.token)]
    elif args.app:
        digests = [t.sha256 for t in list_tokens(client) if t.app == args.app]
    else:
        digests = [t.sha256 for t in list_tokens(client) if t.sha256.startswith(args.id.lower())]
        if len(digests) > 1:
            raise CliError(f"token id {args.id!r} is ambiguous: give more of it")
    revoked = [digest[:12] for digest in digests if revoke_digest(client, digest)]
    if not revoked:
        raise CliError("no such token")
    if args.json:
        print(json.dumps({"revoked": revoked}))
    else:
        print(f"revoked {len(revoked)} token{'s' if len(revoked) > 1 else ''}")
    return 0


#: What a campaign's values are, as `campaign list` shows them: an open domain's longest
#: string, a numeric range, a breakdown's attribute sizes, or a categorical domain's size.
VALUE_KEYS = ("max_length", "range", "attributes", "d")


def _campaign_rows(registry: Registry) -> list[dict[str, Any]]:
    """Every campaign with a current config: its state, oracle, epsilon, values, config id."""
    from ldptel.client.campaign_kinds import Breakdown

    rows = []
    for name in registry.names():
        campaign = registry.campaign(name, fresh=True)
        config = registry.current_config(name)
        if campaign is None or config is None:
            continue
        if config.open_domain:
            values: dict[str, Any] = {"max_length": config.max_length}
        elif config.range is not None:
            values = {"range": list(config.range)}
        elif isinstance(config.kind, Breakdown):
            names, labels = config.kind.attributes.names, config.kind.attributes.labels
            sizes = (f"{name}:{len(own)}" for name, own in zip(names, labels, strict=True))
            values = {"attributes": ",".join(sizes)}
        else:
            values = {"d": config.domain_size}
        state = "retired" if campaign.retired else "active"
        rows.append({
            "name": name, "state": state, "oracle": config.oracle, "epsilon": config.epsilon,
            **values, "config_id": campaign.config_id,
        })  # fmt: skip
    return rows


def _campaign(args: argparse.Namespace) -> int:
    from ldptel.cli.main import CliError
    from ldptel.client.campaign import CampaignConfig
    from ldptel.store.registry import CampaignRetiredError, Registry

    registry = Registry(redis_client(args.redis_url))
    if args.campaign_action == "list":
        rows = _campaign_rows(registry)
        if args.json:
            print(json.dumps({"campaigns": rows}))
            return 0
        for row in rows:
            values = "  ".join(f"{key}={row[key]}" for key in VALUE_KEYS if key in row)
            print(f"{row['name']}  {row['state']}  {row['oracle']}  epsilon={row['epsilon']:g}  "
                  f"{values}  config_id={row['config_id']}")  # fmt: skip
        return 0
    if args.campaign_action == "retire":
        if not registry.retire(args.name):
            raise CliError(f"unknown campaign {args.name!r}")
        print(
            json.dumps({"name": args.name, "retired": True})
            if args.json
            else f"retired {args.name}"
        )
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
