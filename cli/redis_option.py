"""Which Redis a command talks to, decided the same way by every command: `--redis-url`, else
$LDPTEL_REDIS_URL, else the private Redis of a `ldptel collector serve` running with the same
data directory ($LDPTEL_DATA_DIR, else ./.ldptel; it writes redis.url there while it runs),
else a clear error. Never a silent guess such as the machine's shared Redis."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # redis is not imported before a command needs it (client-only installs)
    from ldptel.store.connection import RedisClient

VARIABLE = "LDPTEL_REDIS_URL"
HELP = (
    "Redis of the collector; redis+cluster://host:port[,host:port...] for a Redis Cluster "
    f"(default: ${VARIABLE}, else the private Redis of a `ldptel collector serve` in this "
    "directory, named in .ldptel/redis.url)"
)


def add_redis_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis-url", default=None, metavar="URL", help=HELP)


def data_dir(environ: Mapping[str, str]) -> Path:
    from ldptel.store.redis_server import DATA_DIR

    return Path(environ.get("LDPTEL_DATA_DIR") or DATA_DIR)


def private_redis_url(environ: Mapping[str, str]) -> str | None:
    """The URL a running `ldptel collector serve` wrote for the other commands, if any."""
    from ldptel.store.redis_server import REDIS_URL_FILE

    url_file = data_dir(environ) / REDIS_URL_FILE
    return url_file.read_text().strip() or None if url_file.exists() else None


def resolve_redis_url(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The flag, else the variable, else the private server's URL; else a CliError."""
    from ldptel.cli.main import CliError

    environ = os.environ if environ is None else environ
    url = flag or environ.get(VARIABLE) or private_redis_url(environ)
    if not url:
        raise CliError(
            f"no Redis: pass --redis-url, set {VARIABLE}, or run `ldptel collector serve` in "
            "this directory (it starts a private Redis)"
        )
    return url


def redis_client(flag: str | None) -> RedisClient:
    """A client for the resolved URL (a cluster client connects at once: errors are CliErrors)."""
    from ldptel.cli.main import CliError
    from ldptel.store.connection import REDIS_ERRORS, connect

    try:
        return connect(resolve_redis_url(flag))
    except REDIS_ERRORS as error:
        raise CliError(f"Redis: {error}") from error
