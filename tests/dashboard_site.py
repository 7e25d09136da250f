"""The dashboard's test site (the `site` fixture of tests/conftest.py): a private
redis-server filled by `ldptel demo`'s simulated users over several windows (through the real
collector, over HTTP) and aggregated; plus one older window whose stored report has too few
reports. Beside it, the demo's favourite-colour campaign (free text against its stored
dictionary, two windows) and a numeric latency campaign whose config changes before its last
window (perturbed reports through the aggregator). The collector (report API, analyst token)
and the dashboard are served on loopback over that Redis for the whole session."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
import requests

from ldptel.aggregator.reports import build_window, store_window
from ldptel.cli import demo, demo_process
from ldptel.client.campaign import DAY
from ldptel.collector import create_app as create_collector
from ldptel.dashboard import create_app as create_dashboard
from ldptel.store import reports
from ldptel.store.redis_server import RedisServer
from ldptel.store.registry import Registry

ANALYST_TOKEN = "analyst-token-for-tests-0123"
#: Windows the demo fills (n users each); one older, empty window is added before them.
WINDOWS = 4
USERS = 4000
#: The open-domain campaign (the demo's favourite colours) and the numeric one.
COLORS = demo.COLOR_CAMPAIGN
LATENCY = "latency"
#: Latency reports per window: few, at epsilon 1 and 2, so the mean's 95% interval runs
#: below the range's low end 0 (values near 0: exponential with mean 60 ms).
LATENCY_USERS = 200


@dataclass(frozen=True)
class Site:
    client: Any
    dashboard: str
    collector: str
    campaign: str
    #: Window starts, oldest first; the first has too few reports.
    windows: list[int]
    #: The latency campaign's window starts and its two config ids (the second from the
    #: last window on).
    latency_windows: list[int]
    latency_configs: tuple[str, str]

    def window_document(self, window: int, campaign: str | None = None) -> Any:
        """A stored document through the collector's report API (the JSON API)."""
        response = requests.get(
            f"{self.collector}/v1/campaigns/{campaign or self.campaign}/reports/{window}",
            headers={"Authorization": f"Bearer {ANALYST_TOKEN}"},
            timeout=10,
        )
        response.raise_for_status()
        return response.json()


def desktop(page: str) -> str:
    """A page's HTML without its phone-sized charts (every chart is drawn at both widths,
    dashboard/charts.py `responsive`), so a count of marks counts one drawing."""
    return re.sub(r'<svg class="[^"]*\bnarrow".*?</svg>', "", page, flags=re.S)


def csrf_field(form: requests.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found, form.text
    return found.group(1)


def sign_in(
    base: str,
    session: requests.Session,
    next_page: str = "/",
    token: str = ANALYST_TOKEN,
    **kw: Any,
) -> requests.Response:
    """The browser's way: GET the form (its CSRF cookie and field), then POST it (the cookie
    sent as a browser would, a Secure one too: behind a TLS proxy the browser used HTTPS)."""
    form = session.get(f"{base}/login", timeout=10, **kw)
    data = {"token": token, "next": next_page, "csrf": csrf_field(form)}
    cookie = {"ldptel_csrf": form.cookies.get("ldptel_csrf") or cookie_value(form)}
    return session.post(
        f"{base}/login", data=data, cookies=cookie, allow_redirects=False, timeout=10, **kw
    )


def cookie_value(answer: requests.Response) -> str:
    """The value of the (one) cookie an answer sets."""
    return answer.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]


def demo_arguments(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args(list(argv))
    args.sdk_users = 0  # the SDK path is the demo test's; here only the HTTP users
    return args


def serve_site() -> Iterator[Site]:
    """Fill, serve, yield the site; stop everything after."""
    import redis

    arguments = ["--windows", str(WINDOWS), "--n", str(USERS), "--oracle", "olh", "--seed", "7"]
    with ExitStack() as stack, RedisServer(appendonly=False) as server:
        args = demo_arguments(*arguments)
        demo.fill(server.url, args, demo.demo_campaign(args), stack)
        client = redis.Redis.from_url(server.url)
        stack.callback(client.close)
        first = min(reports.versions(client, demo.CAMPAIGN))
        empty = build_window(client, Registry(client), demo.CAMPAIGN, first - DAY)
        store_window(client, empty)  # the aggregator's report of a window nobody reported in
        colors = demo_arguments("--scenario", "favorite-color", "--windows", "2", "--n", "3000",
                                "--epsilon", "4", "--seed", "7")  # fmt: skip
        demo.fill(server.url, colors, demo.demo_campaign(colors), stack)
        configs = fill_latency(client, first)
        collector = create_collector({"redis_url": server.url, "analyst_token": ANALYST_TOKEN})
        yield Site(
            client=client,
            dashboard=stack.enter_context(demo_process.serve(create_dashboard(client))),
            collector=stack.enter_context(demo_process.serve(collector)),
            campaign=demo.CAMPAIGN,
            windows=list(reports.versions(client, demo.CAMPAIGN)),
            latency_windows=list(reports.versions(client, LATENCY)),
            latency_configs=configs,
        )


def fill_latency(client: Any, first: int) -> tuple[str, str]:
    """Three windows of latency reports from `first` on, the last under a new config
    (epsilon 2 instead of 1), aggregated; the two config ids."""
    from ldptel.aggregator.worker import Worker
    from ldptel.client.campaign import CampaignConfig
    from ldptel.store import codec, keys

    registry, rng = Registry(client), np.random.default_rng(11)
    ids = []
    for epsilon, days in ((1.0, (0, 1)), (2.0, (2,))):
        config = CampaignConfig.from_dict(
            {"name": LATENCY, "oracle": "sw", "epsilon": epsilon, "range": [0, 2000]}
        ).as_created()
        registry.create(config)
        ids.append(config.config_id)
        mechanism = config.build_mechanism()
        for day in days:
            values = np.clip(rng.exponential(60.0, LATENCY_USERS), 0.0, 2000.0)
            packed = mechanism.pack(mechanism.perturb_batch(values, rng))
            window = first + day * DAY
            entry = codec.StreamEntry(config.config_id, window, LATENCY_USERS, packed, "")
            client.xadd(keys.stream(LATENCY, 0), codec.encode(entry))
    Worker(client).run_pass()
    return ids[0], ids[1]
