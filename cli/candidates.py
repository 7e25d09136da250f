"""`ldptel aggregator candidates NAME [FILE]`: set, show or clear an open-domain campaign's
candidate list (store/candidates.py), the strings every window report estimates. Setting
or clearing it rebuilds the stored reports of the windows whose state is kept, so the
dashboard and the report API show the new list at once."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ldptel.cli.redis_option import add_redis_argument, redis_client
from ldptel.cli.report_arguments import add_report_arguments
from ldptel.client.errors import ParameterError


def add_candidates_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "candidates",
        help="set, show or clear an open-domain campaign's candidate list (its dictionary)",
    )
    parser.add_argument("campaign", help="campaign name (an open-domain campaign, not pem)")
    parser.add_argument(
        "file", nargs="?", help="the strings, one per line (UTF-8); without it: show the list"
    )
    parser.add_argument("--clear", action="store_true", help="remove the campaign's list")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_redis_argument(parser)
    add_report_arguments(parser)


def run_candidates(args: argparse.Namespace) -> int:
    from ldptel.aggregator.worker import Worker
    from ldptel.cli.report import read_candidates
    from ldptel.cli.report_arguments import report_options
    from ldptel.store import candidates
    from ldptel.store.registry import Registry

    client = redis_client(args.redis_url)
    config = Registry(client).current_config(args.campaign)
    if config is None:
        raise ParameterError("campaign", f"unknown campaign {args.campaign!r}")
    if not config.open_domain or config.discovers:
        raise ParameterError(
            "campaign", f"{args.campaign!r} is not an open-domain campaign that takes candidates"
        )
    if args.clear and args.file:
        raise ParameterError("clear", "either a FILE or --clear")
    if not (args.clear or args.file):
        stored = candidates.load(client, args.campaign)
        listed = {"values": list(stored.values), "source": stored.source} if stored else None
        print(json.dumps(listed) if args.json else "\n".join(stored.values if stored else ()))
        return 0
    if args.clear:
        changed = candidates.clear(client, args.campaign)
        outcome: dict[str, Any] = {"campaign": args.campaign, "candidates": 0}
    else:
        given = read_candidates(args.file)
        candidates.save(client, args.campaign, list(given.values), given.source)
        changed, outcome = True, {"campaign": args.campaign, "candidates": len(given.values)}
    worker = Worker(client, report_options=report_options(args))
    outcome["windows_rebuilt"] = worker.rebuild(args.campaign).reports_built if changed else 0
    if args.json:
        print(json.dumps(outcome))
    else:
        print(
            f"{args.campaign}: {outcome['candidates']:,} candidates; "
            f"{outcome['windows_rebuilt']:,} window reports rebuilt"
        )
    return 0
