"""`ldptel demo`: the whole pipeline on this machine, with nothing installed by hand.

A private redis-server, the collector on a free port (real HTTP), a demo campaign, N simulated
users posting randomized reports in batches, one aggregator pass, then the report as a table
(with the true counts of the simulated data beside the estimates) and as an HTML page.
Everything it starts is stopped on exit, on Ctrl-C and on SIGTERM.

Scenarios: "screens" (default), a categorical campaign of app screens; "favorite-color", an
open-domain campaign where users type their favourite colour as free text, with a long tail
of misspellings and of rare names held by one user each; its report estimates the colour
names of a public dictionary (cli/color_names.py) and lists only those clearing the release
threshold. With `--oracle pem` the same users report to a "pem" campaign, whose report
discovers the frequent answers with no dictionary at all (Prefix Extending Method,
docs/heavy-hitters.md); its answers are at most PEM_MAX_LENGTH bytes.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldptel.cli.demo_data import (
    COLOR_MAX_LENGTH,
    PEM_MAX_LENGTH,
    SCREENS,
    Scenario,
    item_names,
    scenario,
)
from ldptel.cli.demo_driver import (
    ADMIN_APP,
    SDK_USERS,
    Filled,
    admin_post,
    post_reports,
    report_through_sdk,
    run_step,
)
from ldptel.cli.demo_process import (
    SimulatedClock,
    Stage,
    serve,
    serve_dashboard,
    sigterm_as_interrupt,
)
from ldptel.cli.progress import shows_progress
from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    pass


CAMPAIGN = "demo-screens"


COLOR_CAMPAIGN = "demo-favorite-color"


SCENARIOS = ("screens", "favorite-color", "daily")


def default_oracle() -> str:
    from ldptel.client.oracles import ORACLES

    return "oue" if "oue" in ORACLES else "de"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="screens",
        help="screens: app screens, a fixed domain (default); favorite-color: free-text "
        "answers, an open-domain campaign reported against a dictionary of colour names; "
        "daily: a yes/no answer every day for a year, some users changing it, under "
        "memoization tree (cli/demo_daily.py)",
    )
    parser.add_argument(
        "--n", type=int, default=None, help="simulated users (default 100000; daily: 2000)"
    )
    parser.add_argument(
        "--oracle",
        default=None,
        help="oracle name (default oue; favorite-color: auto, or pem to discover the answers "
        "with no dictionary)",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="privacy budget (default 1; daily: 4 for the whole year of each install's reports)",
    )
    parser.add_argument(
        "--domain-size", type=int, default=len(SCREENS), metavar="D", help="items (default 32)"
    )
    parser.add_argument("--zipf-exponent", type=float, default=1.1, metavar="S")
    parser.add_argument("--seed", type=int, default=2024, help="simulation seed (default 2024)")
    parser.add_argument(
        "--sdk-users",
        type=int,
        default=None,
        metavar="K",
        help=f"how many of the users report through the client SDK (default {SDK_USERS}, "
        "at most n)",
    )
    parser.add_argument(
        "--html",
        default=".ldptel/demo-report.html",
        metavar="FILE",
        help="where to write the HTML report (default ./.ldptel/demo-report.html)",
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=1,
        metavar="K",
        help="simulate K consecutive windows (the last one current) with a drifting "
        "distribution, n users each (default 1)",
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="then serve the dashboard over the demo's data on a loopback port until Ctrl-C",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def demo_campaign(args: argparse.Namespace) -> dict[str, Any]:
    """The demo campaign, validated here (one clear error before anything is started)."""
    from ldptel.client.campaign import CampaignConfig

    if args.epsilon is None:  # the default depends on the scenario (--help)
        args.epsilon = 4.0 if args.scenario == "daily" else 1.0

    campaign: dict[str, Any]
    if args.scenario == "daily":
        from ldptel.cli.demo_daily import daily_campaign

        campaign = daily_campaign(args.epsilon)
    elif args.scenario == "favorite-color":
        oracle = args.oracle or "auto"
        campaign = {
            "name": COLOR_CAMPAIGN,
            "oracle": oracle,
            "epsilon": args.epsilon,
            "max_length": PEM_MAX_LENGTH if oracle == "pem" else COLOR_MAX_LENGTH,
            "shards": 2,
        }
    else:
        campaign = {
            "name": CAMPAIGN,
            "oracle": args.oracle or default_oracle(),
            "epsilon": args.epsilon,
            "domain": item_names(args.domain_size),
            "shards": 2,
        }
    CampaignConfig.from_dict(campaign).build_mechanism()
    return campaign


def run(args: argparse.Namespace) -> int:
    daily = args.scenario == "daily"
    if args.n is None:
        from ldptel.cli.demo_daily import DAILY_USERS

        args.n = DAILY_USERS if daily else 100_000
    if daily and args.sdk_users:  # the SDK reports on the wall clock: today, not that year
        raise ParameterError("sdk_users", "the daily scenario simulates a past year: give 0")
    if daily:
        args.sdk_users = 0
    if args.n < 1:
        raise ParameterError("n", "must be >= 1")
    if args.sdk_users is None:
        args.sdk_users = min(SDK_USERS, args.n)
    if not 0 <= args.sdk_users <= args.n:
        raise ParameterError("sdk_users", "must be in [0, n]")
    if not 1 <= args.windows <= 60:
        raise ParameterError("windows", "must be in [1, 60] for the demo")
    if not 2 <= args.domain_size <= 4096:
        raise ParameterError("domain_size", "must be in [2, 4096] for the demo")
    campaign = demo_campaign(args)
    try:  # before anything starts: a bad --html fails at once, not after the whole run
        Path(args.html).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ParameterError("html", f"cannot create {Path(args.html).parent}: {error}") from None
    with sigterm_as_interrupt(), ExitStack() as stack:
        return _demo(args, campaign, stack)


def _demo(args: argparse.Namespace, campaign: dict[str, Any], stack: ExitStack) -> int:
    from ldptel.aggregator.html import render_html
    from ldptel.aggregator.model import to_json
    from ldptel.aggregator.table import format_window
    from ldptel.cli.report import write_output
    from ldptel.store.redis_server import RedisServer

    show = shows_progress(sys.stderr, machine_output=args.json)
    server = run_step("starting redis-server", show, lambda: RedisServer(appendonly=False).start())
    stack.callback(server.cleanup)
    if args.scenario == "daily":
        from ldptel.cli.demo_daily import fill_daily

        filled = fill_daily(server.url, args, campaign, stack, show)
    else:
        filled = fill(server.url, args, campaign, stack, show)
    document, true_counts = filled.document, filled.true_counts
    timings = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in Stage.TIMINGS.items())
    print(f"stages: {timings}", file=sys.stderr)
    for report in document["reports"]:
        for item in report["items"]:
            item["true_count"] = true_counts[item["index"]]
    write_output(Path(args.html), render_html(document), "html")
    if args.json:
        print(to_json(document, indent=2))
    else:
        print(format_window(document, true_counts))
        print(f"\nHTML report: {Path(args.html).resolve()}")
    if args.dashboard:
        serve_dashboard(server.url, str(campaign["name"]), stack)
    return 0


def fill(
    redis_url: str,
    args: argparse.Namespace,
    campaign: dict[str, Any],
    stack: ExitStack,
    show: bool = False,
) -> Filled:
    """The collector on a free port over `redis_url`, the campaign, args.n users in each of
    args.windows consecutive windows (the last one the current window, where the SDK users
    report too), one aggregator pass that stores every window's document; progress bars if
    `show`."""
    import logging

    import redis

    from ldptel.aggregator.reports import build_window, list_windows
    from ldptel.aggregator.worker import Worker
    from ldptel.client.campaign import CampaignConfig
    from ldptel.collector import create_app
    from ldptel.store import candidates as stored_candidates
    from ldptel.store.registry import Registry

    admin_token = secrets.token_urlsafe(32)
    clock = SimulatedClock()
    config = {"redis_url": redis_url, "admin_token": admin_token, "rate_limit": 0}
    app = create_app(config, clock=clock.now)
    for quiet in ("ldptel.collector.access", "werkzeug"):  # one line per request otherwise
        logging.getLogger(quiet).setLevel(logging.WARNING)
    base_url = stack.enter_context(serve(app))

    created = run_step(
        "registering campaign",
        show,
        lambda: admin_post(base_url, "/v1/campaigns", admin_token, campaign),
    )
    stamped = {**campaign, "config_id": created["config_id"]}
    window_seconds = CampaignConfig.from_dict(campaign).window_seconds
    token = admin_post(base_url, "/v1/tokens", admin_token, {"app": ADMIN_APP})["token"]

    rng = np.random.default_rng(args.seed)
    users: Scenario | None = None
    for number in range(args.windows):
        last = number == args.windows - 1
        clock.offset = (args.windows - 1 - number) * window_seconds
        drift = number / (args.windows - 1) if args.windows > 1 else 0.0
        users = scenario(args, campaign, rng, drift)
        sdk_users = args.sdk_users if last else 0
        if sdk_users:  # on the wall clock, which the SDK's ledger reads from the collector
            stage = Stage("users via the SDK", show, total=sdk_users, unit="user")
            try:
                report_through_sdk(base_url, token, users.name, users.answers[:sdk_users], stage)
            finally:
                stage.close()
        label = "users posting reports"
        if args.windows > 1:
            label = f"window {number + 1}/{args.windows} users"
        stage = Stage(label, show, total=args.n - sdk_users, unit="report")
        try:
            answers = users.answers[sdk_users:]
            post_reports(base_url, token, stamped, answers, args.seed + number, stage)
        finally:
            stage.close()
    assert users is not None  # args.windows >= 1

    client = redis.Redis.from_url(redis_url)
    stack.callback(client.close)
    if users.candidates is not None:  # the campaign's dictionary, for every stored window
        stored_candidates.save(
            client, users.name, list(users.candidates.values), users.candidates.source
        )
    stage = Stage("aggregating", show, total=args.n * args.windows, unit="report")
    try:
        Worker(client, on_step=lambda result: stage.advance(result.reports)).run_pass()
    finally:
        stage.close()

    stage = Stage("building the report", show, total=1)
    try:
        registry = Registry(client)
        window = list_windows(client, registry, users.name)[-1]
        document = build_window(client, registry, users.name, window)
        stage.advance()
    finally:
        stage.close()
    return Filled(document, users.true_counts(document))
