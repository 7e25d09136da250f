"""The dashboard for numeric campaigns (the mean's trend with its confidence band, the latest
window's distribution, the mean's change between windows) and open-domain campaigns (the
discovered strings with their estimates and the release threshold), through the real
pipeline (perturbed reports -> worker -> stored documents) and in headless Chromium."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

import numpy as np
import pytest
import requests
from chromium import launch
from dashboard_site import desktop

from ldptel.aggregator.reports import (
    Candidates,
    build_window,
    load_window,
    significance_z,
    store_window,
)
from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.client.campaign import CampaignConfig
from ldptel.client.hashing import item_keys
from ldptel.client.oracles import ReportBatch
from ldptel.dashboard import create_app
from ldptel.store import codec, keys
from ldptel.store.registry import Registry

DAY = 86_400
WINDOW = 1_700_006_400 - 1_700_006_400 % DAY
#: Mean latency (ms) of the users in each of three windows: the last one is far slower.
MEANS = (300.0, 300.0, 1500.0)


def append(client: Any, config: CampaignConfig, batch: ReportBatch, window: int) -> None:
    """One client batch as the collector stores it in the campaign's stream."""
    n = len(next(iter(batch.values())))
    packed = config.build_mechanism().pack(batch)
    entry = codec.StreamEntry(config.config_id, window, n, packed, "")
    client.xadd(keys.stream(config.name, 0), codec.encode(entry))


def numeric_campaign(client: Any) -> CampaignConfig:
    """An sw latency campaign over [0, 2000] ms, 2,000 users in each of three windows."""
    config = CampaignConfig.from_dict(
        {"name": "latency", "oracle": "sw", "epsilon": 2.0, "range": [0, 2000]}
    ).as_created()
    Registry(client).create(config)
    mechanism = config.build_mechanism()
    rng = np.random.default_rng(7)
    for day, mean in enumerate(MEANS):
        values = np.clip(rng.normal(mean, 100.0, 2000), 0.0, 2000.0)
        append(client, config, mechanism.perturb_batch(values, rng), WINDOW + day * DAY)
    Worker(client).run_pass()
    return config


def open_campaign(client: Any, frequent: tuple[str, str] = ("tea", "coffee")) -> CampaignConfig:
    """A CMS campaign of free text, one window with two frequent answers and a rare one."""
    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "cms", "epsilon": 4.0, "max_length": 64,
         "params": {"k": 64, "m": 256}}
    ).as_created()  # fmt: skip
    Registry(client).create(config)
    oracle = config.build_open()
    words = [frequent[0]] * 900 + [frequent[1]] * 600 + ["mate"]
    append(client, config, oracle.perturb_keys(item_keys(words), np.random.default_rng(6)), WINDOW)  # type: ignore[attr-defined]
    Worker(client).run_pass()
    candidates = Candidates((*frequent, "mate", "cocoa"), "test list")
    store_window(
        client, build_window(client, Registry(client), "answers", WINDOW, None, None, candidates)
    )
    return config


def test_a_numeric_campaign_shows_the_mean_its_band_distribution_and_change(
    redis_client: Any,
) -> None:
    numeric_campaign(redis_client)
    stored = [load_window(redis_client, "latency", WINDOW + d * DAY) for d in range(3)]
    means = [document["reports"][0]["numeric"]["mean"] for document in stored if document]
    with serve(create_app(redis_client)) as base:
        listed = requests.get(f"{base}/", timeout=30).text
        assert "<td class='domain'>range [0, 2000]</td>" in listed
        page = desktop(requests.get(f"{base}/campaigns/latency", timeout=30).text)
        # The mean is the one trend, a point per window in its band; the latest window's
        # histogram has one bar per bucket, with its CDF.
        assert page.count('<circle class="point"') == 3 and 'data-item="mean"' in page
        buckets = stored[2]["reports"][0]["numeric"]["distribution"]["buckets"]  # type: ignore[index]
        assert page.count('<rect class="bucket"') == len(buckets)
        assert '<polyline class="cdf"' in page

        trend = requests.get(f"{base}/campaigns/latency/trend.json", timeout=30).json()
        assert [row["estimate"] for row in trend["rows"]] == [m["estimate"] for m in means]
        assert [row["ci_low"] for row in trend["rows"]] == [m["ci_low"] for m in means]

        z = significance_z(2, 0.05)  # two-sided at 5% for the one "item", the mean
        for before, after, flagged in ((0, 1, False), (1, 2, True)):
            params = {"from": WINDOW + before * DAY, "to": WINDOW + after * DAY}
            found = requests.get(
                f"{base}/campaigns/latency/change.json", params=params, timeout=30
            ).json()
            (row,) = found["rows"]
            stderr = math.sqrt(means[before]["variance"] + means[after]["variance"])
            assert row["item"] == "mean"
            assert row["difference"] == means[after]["estimate"] - means[before]["estimate"]
            assert row["stderr"] == pytest.approx(stderr, rel=1e-12)
            assert found["threshold"] == pytest.approx(z)
            # Same users' distribution: no flag (fails with probability 5%, fixed seed);
            # 1,200 ms slower: flagged (|z| > 100).
            assert row["significant"] is flagged


def test_a_discovered_formula_is_downloaded_as_text_not_run(redis_client: Any) -> None:
    """Free text app users sent, as the trend download writes it (the change download is the
    same writer): a spreadsheet shows it, never runs it (OWASP's leading quote)."""
    formulas = ('=HYPERLINK("http://evil.example","x")', "-2+3")
    open_campaign(redis_client, formulas)
    with serve(create_app(redis_client)) as base:
        params = {"items": list(formulas)}
        response = requests.get(f"{base}/campaigns/answers/trend.csv", params=params, timeout=30)
    rows = list(csv.DictReader(io.StringIO(response.text, newline="")))
    assert {row["item"] for row in rows} == {"'" + text for text in formulas}
    assert all(float(row["estimate"]) > 0 for row in rows)  # numbers stay numbers


def test_chromium_shows_the_mean_trend_and_the_discovered_strings(redis_client: Any) -> None:
    from playwright.sync_api import sync_playwright

    numeric_campaign(redis_client)
    open_campaign(redis_client)
    with serve(create_app(redis_client)) as base, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.goto(f"{base}/")
            assert page.locator("tr[data-campaign=answers] td.domain").inner_text() == (
                "free text, max_length 64 bytes"
            )
            page.goto(f"{base}/campaigns/latency")
            assert page.locator("svg.trend:visible circle.point").count() == 3
            assert page.locator("svg.trend:visible polygon.band").count() == 1
            assert "mean" in page.locator(".summary").inner_text()
            assert "▲ up" in page.locator("tr[data-item=mean] td.flag").inner_text()

            page.goto(f"{base}/campaigns/answers")
            rows = page.locator("table.items tbody tr")
            shown = {rows.nth(i).get_attribute("data-item") for i in range(rows.count())}
            assert shown == {"tea", "coffee"}
            text = page.locator("p.discovery").inner_text()
            assert "2 of 4 candidates (test list) discovered" in text
            assert "release threshold" in text
        finally:
            browser.close()


def test_the_share_the_listed_strings_explain_covers_the_true_share(redis_client: Any) -> None:
    """tea (900) and coffee (600) of 1,501 answers are listed: they explain 1,500 / 1,501 of
    the reports, inside the stated interval (conservative: +- z times the sum of stderrs)."""
    open_campaign(redis_client)
    with serve(create_app(redis_client)) as base:
        page = requests.get(f"{base}/campaigns/answers", timeout=30).text
    found = re.search(
        r"The 2 listed strings explain an estimated ([\d.]+)% of the 1,501 reports \(95% "
        r"interval ([\d.]+)% to ([\d.]+)%",
        page,
    )
    assert found, page
    share, low, high = (float(v) / 100 for v in found.groups())
    assert low <= 1500 / 1501 <= high and low < share <= high
