"""The TypeScript client in a web page, in real headless Chromium (Debian's, driven by
playwright-core), reporting through CORS to a real collector on another origin: the window
report counts exactly what the page sent, whether the page flushed or its spool went out
when the page was hidden (fetch keepalive)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from collector_api import DOMAIN, campaign_config
from js_harness import Collector, run_node
from waiting import wait_for

from ldptel.aggregator.reports import ReportOptions, build_window, list_windows
from ldptel.aggregator.worker import Worker
from ldptel.store import keys
from ldptel.store.registry import Registry

SENT = ["red", "green", "blue", "red", "cyan", "pink", "red", "blue", "green", "red", "cyan"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def site(client_js: Path) -> Iterator[str]:
    """client-js/ served as static files: the page's origin (another port than the
    collector's, so every request to the collector is cross-origin)."""
    handler = functools.partial(_Quiet, directory=str(client_js))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def open_page(client_js: Path, site: str, collector: Collector, token: str, mode: str) -> Any:
    values = ",".join(SENT)
    page = {"collector": collector.url, "token": token, "campaign": "colors", "mode": mode}
    query = urlencode({**page, "values": values})
    out = run_node(client_js / "e2e" / "browser.mjs", f"{site}/e2e/page.html?{query}")
    return json.loads(out)


def window_count(redis_client: Any) -> int:
    assert Worker(redis_client).run_pass().reports == len(SENT)
    (window,) = list_windows(redis_client, Registry(redis_client), "colors")
    document = build_window(
        redis_client, Registry(redis_client), "colors", window, ReportOptions(), None, None
    )
    (report,) = document["reports"]
    return int(report["n"])


def make_campaign(collector: Collector) -> str:
    # One install (the page's IndexedDB) sends all: room for its reports in one window.
    config = campaign_config(reports_per_window=len(SENT), lifetime_epsilon=1e6)
    collector.api.create_campaign(config)
    return collector.api.create_token()


def test_a_page_reports_through_cors_and_the_window_counts_it(
    client_js: Path, site: str, collector: Collector, redis_client: Any
) -> None:
    assert set(SENT) <= set(DOMAIN)
    token = make_campaign(collector)
    seen = open_page(client_js, site, collector, token, "flush")
    assert seen["origin"] == site and site != collector.url
    assert seen["statuses"] == ["spooled"] * len(SENT), seen
    assert seen["flushed"] is True and seen["stats"]["delivered"] == len(SENT), seen
    assert seen["errors"] == [] and seen["console"] == [], seen
    assert window_count(redis_client) == len(SENT)


def test_a_hidden_page_delivers_its_spool_with_keepalive(
    client_js: Path, site: str, collector: Collector, redis_client: Any
) -> None:
    token = make_campaign(collector)
    seen = open_page(client_js, site, collector, token, "hide")
    assert seen["statuses"] == ["spooled"] * len(SENT) and seen["stats"]["delivered"] == 0, seen
    arrived = lambda: redis_client.xlen(keys.stream("colors", 0)) > 0  # noqa: E731
    wait_for(arrived, "the hidden page's spool arrived (its keepalive post)")
    assert window_count(redis_client) == len(SENT)
