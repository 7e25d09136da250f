"""A breakdown campaign's dashboard page: the analyst picks two attributes and sees their
cross-tab (the stored report's numbers, in the picked orientation) with the two one-way
marginals, then one cell's trend over the windows; the trend downloads hold one row per cell
and window. Filled through the real pipeline (perturbed reports -> worker -> stored
documents), three windows, the middle one with too few reports; in headless Chromium at a
phone's 390 px nothing is wider than the screen (the wide cross-tab scrolls inside its own
box) and the picker's script keeps the two attributes different."""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests
from chromium import launch
from test_numeric_and_open_domain import DAY, WINDOW, append

from ldptel.aggregator.model import BreakdownMarginal
from ldptel.aggregator.reports import load_window
from ldptel.aggregator.table import count_text
from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.client.campaign import CampaignConfig
from ldptel.dashboard import create_app
from ldptel.store.registry import Registry

COUNTRIES = ["us", "de", "fr", "jp", "br", "in", "gb", "ca"]
ATTRIBUTES = {"country": COUNTRIES, "os": ["android", "ios", "web"], "plan": ["free", "pro"]}
#: Users in each of three windows; the middle one has fewer than min_reports (100).
USERS = (4000, 40, 4000)
WINDOWS = [WINDOW + day * DAY for day in range(len(USERS))]
WIDTH, HEIGHT = 390, 844
#: Every SVG text's rendered size in CSS px: its font size times the SVG's scale.
LABEL_SIZES = """() => [...document.querySelectorAll('svg text')].filter(t => t.getBBox().width > 0)
  .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""


@pytest.fixture
def site(redis_client: Any) -> Iterator[str]:
    """The campaign filled and aggregated by a real worker pass; the dashboard's URL."""
    config = CampaignConfig.from_dict(
        {"name": "crashes", "oracle": "auto", "epsilon": 2.0, "attributes": ATTRIBUTES}
    ).as_created()
    Registry(redis_client).create(config)
    mechanism = config.build_mechanism()
    rng = np.random.default_rng(29)
    joint = len(COUNTRIES) * 3 * 2
    for window, users in zip(WINDOWS, USERS, strict=True):
        rows = rng.choice(joint, users, p=rng.dirichlet(np.ones(joint)))
        append(redis_client, config, mechanism.perturb_batch(rows, rng), window)
    Worker(redis_client).run_pass()
    with serve(create_app(redis_client)) as base:
        yield base


def stored_marginal(client: Any, window: int, names: list[str]) -> BreakdownMarginal:
    document = load_window(client, "crashes", window)
    assert document is not None
    [report] = document["reports"]
    return next(m for m in report["breakdown"]["marginals"] if m["attributes"] == names)


#: A cross-tab cell of the page: its labels, estimate and interval as shown.
CELL = re.compile(
    r'<td class="heat-\d( chosen)?" data-values="([^"]+)"><a [^>]*>([\d,.-]+)<br>'
    r'<span class="ci">\[([\d,.-]+), ([\d,.-]+)\]</span></a></td>'
)


def shown_cells(page: str) -> dict[str, tuple[str, str, str]]:
    table = page[page.index('<table class="breakdown-heatmap"') :].split("</table>")[0]
    return {html.unescape(m[2]): (m[3], m[4], m[5]) for m in CELL.finditer(table)}


def test_the_picked_pairs_cross_tab_is_the_stored_reports(site: str, redis_client: Any) -> None:
    page = requests.get(f"{site}/campaigns/crashes", timeout=30).text
    assert 'data-rows="country" data-columns="os"' in page  # the default: first two names
    assert "Latest window" in page and 'data-marginal="country"' in page
    # rows=plan, columns=os: stored as os x plan, shown transposed; the first window.
    query = {"rows": "plan", "columns": "os", "to": str(WINDOWS[0])}
    page = requests.get(f"{site}/campaigns/crashes", params=query, timeout=30).text
    assert 'data-marginal="plan x os" data-rows="plan" data-columns="os"' in page
    stored = stored_marginal(redis_client, WINDOWS[0], ["os", "plan"])
    shown = shown_cells(page)
    assert len(shown) == len(stored["cells"]) == 6
    for cell in stored["cells"]:
        os_label, plan_label = cell["values"]
        assert shown[f"{plan_label}|{os_label}"] == (
            count_text(cell["estimate"]), count_text(cell["ci_low"]), count_text(cell["ci_high"])
        )  # fmt: skip
    # Beside it, the two one-way marginals of that window, every label's estimate.
    for name in ("plan", "os"):
        one_way = page[page.index(f'<table class="breakdown-marginal" data-marginal="{name}"') :]
        one_way = one_way.split("</table>")[0]
        for cell in stored_marginal(redis_client, WINDOWS[0], [name])["cells"]:
            assert f"<td>{cell['values'][0]}</td><td>{count_text(cell['estimate'])}<br>" in one_way
    # The default cell is the largest; it is marked and its trend drawn.
    largest = max(stored["cells"], key=lambda c: c["estimate"])
    key = f"{largest['values'][1]}|{largest['values'][0]}"
    assert re.search(rf'<td class="heat-\d chosen" data-values="{re.escape(key)}">', page)
    assert f'<figure class="trend" data-cell="{key}">' in page


def test_a_cells_trend_has_one_point_per_window(site: str, redis_client: Any) -> None:
    query = {"rows": "os", "columns": "plan", "cell": "ios|pro"}
    page = requests.get(f"{site}/campaigns/crashes", params=query, timeout=30).text
    assert "<figcaption><h3>os = ios, plan = pro</h3></figcaption>" in page
    figure = page[page.index('<figure class="trend" data-cell="ios|pro">') :].split("</figure>")[0]
    ios_pro = {
        w: next(
            c for c in stored_marginal(redis_client, w, ["os", "plan"])["cells"]
            if c["values"] == ["ios", "pro"]
        )
        for w in (WINDOWS[0], WINDOWS[2])
    }  # fmt: skip
    drawings = re.findall(r'<svg class="trend (?:wide|narrow)".*?</svg>', figure)
    assert len(drawings) == 2  # a desktop's and a phone's width
    for svg in drawings:
        points = re.findall(r'<circle class="point"[^>]*data-window="(\d+)"', svg)
        assert points == [str(WINDOWS[0]), str(WINDOWS[2])]  # the thin window not plotted...
        assert svg.count('class="gap"') == 1  # ...but marked
    assert figure.count("<tr data-window=") == len(WINDOWS)  # every window in the numbers
    for name in ("trend.json", "trend.csv"):  # exactly the stored floats
        response = requests.get(f"{site}/campaigns/crashes/{name}", params=query, timeout=30)
        assert response.status_code == 200
        if name == "trend.json":
            rows = response.json()["rows"]
        else:
            rows = list(csv.DictReader(io.StringIO(response.text)))
        assert [int(r["window"]) for r in rows] == WINDOWS
        assert {r["attributes"] for r in rows} == {"os x plan"}
        assert {r["values"] for r in rows} == {"ios | pro"}
        thin = rows[1]
        assert thin["status"] == "not_enough_reports" and thin["estimate"] in (None, "")
        for row in (rows[0], rows[2]):
            cell = ios_pro[int(row["window"])]
            for field in ("estimate", "stderr", "ci_low", "ci_high", "consistent"):
                assert float(row[field]) == cell[field]  # type: ignore[literal-required]
    # Without a cell: every cell of the pair, cell after cell, one row per window.
    rows = requests.get(f"{site}/campaigns/crashes/trend.json", timeout=30).json()["rows"]
    assert len(rows) == len(COUNTRIES) * 3 * len(WINDOWS)
    assert rows[0]["values"] == "us | android" and rows[-1]["values"] == "ca | web"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"rows": "os", "columns": "os"}, "columns"),
        ({"rows": "device"}, "rows"),
        ({"rows": "os", "columns": "plan", "cell": "pro|ios"}, "cell"),
        ({"to": "12"}, "to"),
    ],
)
def test_a_bad_pick_is_a_400_naming_its_field(site: str, query: dict[str, str], field: str) -> None:
    for path in ("", "/trend.json"):
        if path and field == "to":
            continue  # the downloads are over every window
        response = requests.get(f"{site}/campaigns/crashes{path}", params=query, timeout=30)
        assert response.status_code == 400
        assert response.json()["error"]["field"] == field


def test_a_campaign_without_reports_yet_has_a_page(redis_client: Any) -> None:
    config = CampaignConfig.from_dict(
        {"name": "crashes", "oracle": "auto", "epsilon": 2.0, "attributes": ATTRIBUTES}
    ).as_created()
    Registry(redis_client).create(config)
    with serve(create_app(redis_client)) as base:
        page = requests.get(f"{base}/campaigns/crashes", timeout=30)
        assert page.status_code == 200 and "No stored report for this campaign yet" in page.text
        rows = requests.get(f"{base}/campaigns/crashes/trend.json", timeout=30).json()["rows"]
        assert rows == []


def test_on_a_phone_the_cross_tab_scrolls_inside_and_the_picker_swaps(site: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(
                viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=3,
                is_mobile=True, has_touch=True,
            )  # fmt: skip
            phone = context.new_page()
            errors: list[str] = []
            phone.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            phone.on("pageerror", lambda e: errors.append(str(e)))
            phone.goto(f"{site}/campaigns/crashes?rows=os&columns=country")
            assert phone.evaluate("window.innerWidth") == WIDTH
            overflow = phone.evaluate("document.documentElement.scrollWidth")
            assert overflow <= WIDTH, f"the page is {overflow} px wide"
            # The table scrolls in its own box (itself, or the div around it).
            box = phone.evaluate(
                "(() => { const t = document.querySelector('table.breakdown-heatmap');"
                " return [t.scrollWidth, t.clientWidth, t.parentElement.clientWidth]; })()"
            )
            assert box[0] > box[1] and box[1] <= box[2] <= WIDTH, box
            # The trend's labels render at 10 px or more (as on every dashboard page).
            sizes = phone.evaluate(LABEL_SIZES)
            assert sizes and min(sizes) >= 10.0, sorted(sizes)[:5]
            # The picker: rows set to the columns' attribute swaps them; Show draws that pair.
            phone.select_option("form[data-pair] select[name=rows]", "country")
            assert phone.input_value("form[data-pair] select[name=columns]") == "os"
            phone.click("form[data-pair] button")
            phone.wait_for_selector('table[data-rows="country"][data-columns="os"]')
            assert "rows=country&columns=os" in phone.url
            # A cell of the cross-tab draws its trend.
            phone.click('td[data-values="jp|ios"] a')
            phone.wait_for_selector('figure.trend[data-cell="jp|ios"]')
            assert phone.evaluate("document.documentElement.scrollWidth") <= WIDTH
            assert errors == []  # no script error, nothing refused by the CSP
        finally:
            browser.close()
