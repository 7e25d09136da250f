"""`ldptel report CAMPAIGN`: a window's estimates, built from the current window state, as a
table for people, JSON for machines, CSV for spreadsheets, Parquet for dataframes, or a
self-contained HTML page."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ldptel.cli.redis_option import add_redis_argument, redis_client
from ldptel.cli.report_arguments import add_report_arguments, report_options
from ldptel.client.errors import ParameterError
from ldptel.client.labels import check_candidates

if TYPE_CHECKING:
    from ldptel.aggregator.model import WindowDocument
    from ldptel.aggregator.reports import Candidates
    from ldptel.store.connection import RedisClient
    from ldptel.store.registry import Registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", help="campaign name")
    parser.add_argument(
        "--window",
        default="latest",
        help="window start: unix seconds, an ISO date/time, or 'latest' (default)",
    )
    parser.add_argument("--list", action="store_true", help="list the windows that have data")
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--candidates",
        metavar="FILE",
        help="open-domain campaigns: the strings to estimate, one per line (UTF-8); only "
        "those clearing the release threshold are listed",
    )
    given.add_argument(
        "--candidates-from",
        metavar="REPORT",
        help="open-domain campaigns: estimate the strings listed in a report saved with "
        "`ldptel report --json` (e.g. an earlier window's discoveries)",
    )
    add_redis_argument(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help="print the window document (with --list: the windows) as JSON",
    )
    output.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    output.add_argument(
        "--csv",
        metavar="FILE",
        help="write every item's counts and proportions as CSV ('-' for stdout)",
    )
    output.add_argument(
        "--parquet",
        metavar="FILE",
        help="write the CSV's rows as a typed Parquet file (needs pyarrow: the [parquet] extra)",
    )
    add_report_arguments(parser)


def write_output(path: Path, text: str, option: str) -> None:
    """Write a report file; a path that cannot be written is a one-line error naming the
    option that gave it."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ParameterError(option, f"cannot write {path}: {error.strerror}") from None


def parquet_output(document: WindowDocument, path: Path) -> int:
    """Write the Parquet file; no pyarrow or an unwritable path is a one-line error."""
    from ldptel.aggregator.parquet_export import ParquetUnavailableError, write_parquet

    try:
        return write_parquet(document, path)
    except ParquetUnavailableError as error:
        raise ParameterError("parquet", str(error)) from None
    except OSError as error:
        raise ParameterError("parquet", f"cannot write {path}: {error.strerror}") from None


def read_text(path: str, field: str) -> str:
    """A UTF-8 file given for option `field`; one that cannot be read is a one-line error."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ParameterError(field, f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ParameterError(field, f"{path} is not UTF-8 text") from None


def read_candidates(path: str) -> Candidates:
    """The candidates in a file of one string per line (blank lines skipped)."""
    from ldptel.aggregator.reports import Candidates

    lines = read_text(path, "candidates").splitlines()
    values = check_candidates(line for line in lines if line.strip())
    return Candidates(tuple(values), f"file {Path(path).name}")


def discovered_candidates(path: str) -> Candidates:
    """The strings an open-domain report document (`ldptel report --json`) lists."""
    from ldptel.aggregator.model import from_json
    from ldptel.aggregator.reports import Candidates
    from ldptel.aggregator.typed_json import DocumentError

    text = read_text(path, "candidates_from")
    try:
        document = from_json(text)
    except (ValueError, DocumentError) as error:
        raise ParameterError(
            "candidates_from", f"{path}: not a report document ({error})"
        ) from None
    found = [
        item["item"] for report in document["reports"] if "discovery" in report
        for item in report["items"]
    ]  # fmt: skip
    values = check_candidates(found, "candidates_from")
    return Candidates(tuple(values), f"discovered in {document['window']['start']}")


def run(args: argparse.Namespace) -> int:
    from ldptel.aggregator.csv_export import render_csv
    from ldptel.aggregator.html import render_html
    from ldptel.aggregator.model import to_json
    from ldptel.aggregator.reports import build_window, list_windows
    from ldptel.aggregator.retention import window_pruned
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
        if args.json:
            listed = [{"start": iso(window), "start_unix": window} for window in windows]
            print(json.dumps({"campaign": args.campaign, "windows": listed}))
        else:
            print("".join(f"{window}  {iso(window)}\n" for window in windows), end="")
        return 0
    if args.window == "latest":
        if not windows:
            raise ParameterError("window", no_windows(client, registry, args.campaign))
        window = windows[-1]
    else:
        window = config.window_of(parse_window(args.window))
    candidates = None
    if args.candidates is not None:
        candidates = read_candidates(args.candidates)
    elif args.candidates_from is not None:
        candidates = discovered_candidates(args.candidates_from)
    options = report_options(args)
    if window_pruned(client, registry, args.campaign, window):
        document = pruned_window(client, args.campaign, window, candidates is not None)
    else:
        document = build_window(client, registry, args.campaign, window, options, None, candidates)
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
    elif args.parquet:
        rows = parquet_output(document, Path(args.parquet))
        print(f"wrote {args.parquet} ({rows:,} rows)")
    else:
        print(format_window(document))
    return 0


def no_windows(client: RedisClient, registry: Registry, name: str) -> str:
    """Why a campaign has no window to report: nothing accepted yet, or accepted reports the
    aggregator has not counted (they wait in the campaign's streams)."""
    from ldptel.store import keys

    shards = range(registry.shard_count(name))
    waiting = sum(client.xlen(keys.stream(name, shard)) for shard in shards)
    if waiting:
        return (
            f"campaign {name!r} has accepted reports ({waiting:,} stream entries) not yet "
            "aggregated: run `ldptel aggregator run --once`"
        )
    return f"campaign {name!r} has no data yet"


def pruned_window(
    client: RedisClient, name: str, window: int, with_candidates: bool
) -> WindowDocument:
    """The stored report of a window whose state was pruned (it cannot be built again)."""
    from ldptel.aggregator.reports import load_window

    pruned = "its state was pruned (ldptel aggregator prune)"
    if with_candidates:
        reason = f"window {window}: {pruned}; it cannot be reported against new candidates"
        raise ParameterError("candidates", reason)
    document = load_window(client, name, window)
    if document is None:
        raise ParameterError("window", f"{window}: {pruned} and no report of it is stored")
    return document
