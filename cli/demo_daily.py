"""`ldptel demo --scenario daily`: a year of daily windows under memoization "tree".

n simulated installs answer a yes/no question every day for one horizon of 365 daily
windows (the last complete horizon on the demo collector's simulated clock: horizons are
aligned on the window clock, and a year of past days fits only one). 30% start at "yes";
some change their answer once, at a uniform day (40% of the "no" installs to "yes", 10% of
the "yes" installs to "no"), so the share of "yes" rises through the year. Each install's
reports are the tree's (analysis/longitudinal.tree_batches: the law of ldptel.client.tree),
posted window by window through the real collector; one aggregator pass stores every
window's document, whose counts come from prefix sums over the tree with their intervals
(the dashboard draws them as a trend with confidence bands).
"""

from __future__ import annotations

import argparse
import json
import secrets
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from ldptel.cli.demo_driver import Filled

DAILY_CAMPAIGN = "demo-daily"
DAYS = 365
DAILY_USERS = 10_000
START_YES, NO_TO_YES, YES_TO_NO = 0.3, 0.4, 0.1


def daily_campaign(epsilon: float) -> dict[str, Any]:
    return {
        "name": DAILY_CAMPAIGN,
        "oracle": "de",
        "epsilon": epsilon,
        "domain": ["no", "yes"],
        "memoization": "tree",
        "horizon_windows": DAYS,
        "max_changes": 2,
    }


def daily_values(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """(n, 365) answers (1 = "yes"): a first answer, then at most one change (module doc)."""
    first = (rng.random(n) < START_YES).astype(np.int64)
    changes = rng.random(n) < np.where(first == 1, YES_TO_NO, NO_TO_YES)
    day = rng.integers(1, DAYS, n)
    days = np.arange(DAYS)
    after = changes[:, None] & (days[None, :] >= day[:, None])
    return np.where(after, 1 - first[:, None], first[:, None])


def fill_daily(
    redis_url: str, args: argparse.Namespace, campaign: dict[str, Any], stack: ExitStack, show: bool
) -> Filled:
    """The collector on a simulated clock, the campaign, args.n installs over 365 days, one
    aggregator pass; the last day's document and its true counts."""
    import time

    import redis

    from ldptel.aggregator.reports import build_window
    from ldptel.aggregator.worker import Worker
    from ldptel.analysis.longitudinal import tree_batches
    from ldptel.cli.demo_driver import ADMIN_APP, BATCH, Filled, admin_post, post_batch, run_step
    from ldptel.cli.demo_process import SimulatedClock, Stage, serve
    from ldptel.client.campaign import CampaignConfig
    from ldptel.client.transport import Transport
    from ldptel.client.tree_wire import TreeReports
    from ldptel.collector import create_app
    from ldptel.store.registry import Registry

    admin_token = secrets.token_urlsafe(32)
    clock = SimulatedClock()
    app = create_app(
        {"redis_url": redis_url, "admin_token": admin_token, "rate_limit": 0}, clock=clock.now
    )
    base_url = stack.enter_context(serve(app))
    created = run_step(
        "registering campaign",
        show,
        lambda: admin_post(base_url, "/v1/campaigns", admin_token, campaign),
    )
    config = CampaignConfig.from_dict(campaign).as_created()
    token = admin_post(base_url, "/v1/tokens", admin_token, {"app": ADMIN_APP})["token"]
    seconds = config.window_seconds
    today = int(time.time()) // seconds
    first_day = (today // DAYS - 1) * DAYS  # the last complete horizon
    rng = np.random.default_rng(args.seed)
    values = daily_values(args.n, rng)
    shape = config.tree_shape()
    mechanism = TreeReports(shape)
    transport = Transport(base_url, token, timeout=30.0)
    stage = Stage("a year of daily reports", show, total=args.n * DAYS, unit="report")
    try:
        for t, batch in enumerate(tree_batches(values, shape, rng)):
            # Mid-day of window first_day + t on the collector's clock.
            clock.offset = time.time() - ((first_day + t) * seconds + seconds / 2)
            wire = [json.dumps(r, separators=(",", ":")) for r in mechanism.encode(batch)]
            for start in range(0, len(wire), BATCH):
                chunk = wire[start : start + BATCH]
                stage.advance(post_batch(transport, config.name, created["config_id"], chunk))
    finally:
        stage.close()
    client = redis.Redis.from_url(redis_url)
    stack.callback(client.close)
    stage = Stage("aggregating", show, total=args.n * DAYS, unit="report")
    try:
        Worker(client, on_step=lambda result: stage.advance(result.reports)).run_pass()
    finally:
        stage.close()
    last = (first_day + DAYS - 1) * seconds
    document = build_window(client, Registry(client), config.name, last)
    counts = np.bincount(values[:, -1], minlength=2)
    return Filled(document, [int(c) for c in counts])
