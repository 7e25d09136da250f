"""`ldptel report CAMPAIGN`: a window's estimates, built from the current window state, as a
table for people, JSON for machines, CSV for spreadsheets, or a self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ldptel.cli.aggregator import (
    add_redis_argument,
    add_report_arguments,
    redis_client,
    report_options,
)
from ldptel.client.errors import ParameterError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", help="campaign name")
    parser.add_argument(
        "--window",
        default="latest",
        help="window start: unix seconds, an ISO date/time, or 'latest' (default)",
    )
    parser.add_argument("--list", action="store_true", help="list the windows that have data")
    add_redis_argument(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the window document as JSON")
    output.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    output.add_argument(
        "--csv",
        metavar="FILE",
        help="write every item's counts and proportions as CSV ('-' for stdout)",
    )
    add_report_arguments(parser)


def write_output(path: Path, text: str, option: str) -> None:
    """Write a report file; a path that cannot be written is a one-line error naming the
    option that gave it."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ParameterError(option, f"cannot write {path}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    from ldptel.aggregator.csv_export import render_csv
    from ldptel.aggregator.html import render_html
    from ldptel.aggregator.model import to_json
    from ldptel.aggregator.report import build_window, list_windows
    from ldptel.aggregator.table import format_window
    from ldptel.store.registry import Registry
    from ldptel.store.reports import iso, parse_window

    client = redis_client(args.redis_url)
    registry = Registry(client)
    config = registry.current_config(args.campaign)
    if config is None:
        raise ParameterError("campaign", f"unknown campaign {args.campaign!r}")
    windows = list_windows(client, registry, args.campaign)
    if args.list:
        for window in windows:
            print(f"{window}  {iso(window)}")
        return 0
    if args.window == "latest":
        if not windows:
            raise ParameterError("window", f"campaign {args.campaign!r} has no data yet")
        window = windows[-1]
    else:
        window = config.window_of(parse_window(args.window))
    document = build_window(client, registry, args.campaign, window, report_options(args))
    if args.json:
        print(to_json(document, indent=2))
    elif args.html:
        write_output(Path(args.html), render_html(document), "html")
        print(f"wrote {args.html}")
    elif args.csv == "-":
        sys.stdout.write(render_csv(document))
    elif args.csv:
        write_output(Path(args.csv), render_csv(document), "csv")
        print(f"wrote {args.csv}")
    else:
        print(format_window(document))
    return 0
