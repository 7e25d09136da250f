"""The dashboard in a real headless Chromium (Debian's, driven by Playwright; no browser
download): charts render with one point per plotted window and one band per run of them,
the CSV download is the stored numbers of the collector's JSON API, the page works from the
keyboard (search, tick an item, show its trend). Screenshots are kept in .artifacts/."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import launch
from dashboard_site import WINDOWS, Site

ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "dashboard"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    try:
        yield context.new_page()
    finally:
        context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_campaign_page_draws_points_bands_and_the_gap(site: Site, page: Any) -> None:
    page.goto(f"{site.dashboard}/")
    shot(page, "campaigns")
    page.get_by_role("link", name=site.campaign).click()
    page.wait_for_url(f"**/campaigns/{site.campaign}")
    charts = page.locator("svg.trend")
    assert charts.count() == 3  # the three largest items of the latest window by default
    for index in range(charts.count()):
        chart = charts.nth(index)
        points = chart.locator("circle.point")
        assert points.count() == WINDOWS  # the empty window is not plotted...
        assert chart.locator("text.gap").count() == 1  # ...but marked
        assert chart.locator("polygon.band").count() == 1
        box = chart.locator("polygon.band").bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 0
        xs = [points.nth(i).bounding_box()["x"] for i in range(points.count())]  # type: ignore[index]
        assert xs == sorted(xs)
    assert page.locator("svg.chart rect.bar").count() == 32  # today's chart
    shot(page, "campaign")


def test_the_csv_download_is_the_json_api(site: Site, page: Any) -> None:
    page.goto(f"{site.dashboard}/campaigns/{site.campaign}?items=feed&items=home")
    with page.expect_download() as event:
        page.get_by_role("link", name="trends as CSV").click()
    with Path(event.value.path()).open() as download:
        rows = list(csv.DictReader(download))
    assert {r["item"] for r in rows} == {"feed", "home"} and len(rows) == 2 * len(site.windows)
    for row in rows:
        report = site.window_document(int(row["window"]))["reports"][0]
        if report["status"] == "ok":
            stored = next(i for i in report["items"] if i["item"] == row["item"])
            assert (float(row["estimate"]), float(row["ci_low"]), float(row["ci_high"])) == (
                stored["estimate"], stored["ci_low"], stored["ci_high"],
            )  # fmt: skip
        else:
            assert row["estimate"] == "" and row["status"] == report["status"]


def test_search_select_and_show_from_the_keyboard(site: Site, page: Any) -> None:
    page.goto(f"{site.dashboard}/campaigns/{site.campaign}?items=home")
    search = page.get_by_label("search items")
    search.focus()
    page.keyboard.type("sett")
    visible = page.locator("table.items tbody tr:visible")
    assert visible.count() == 1 and visible.first.get_attribute("data-item") == "settings"
    page.keyboard.press("Tab")  # the Show button, then the first visible row's box
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.value") == "settings"
    page.keyboard.press("Space")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")  # Show: submits the view's form
    page.wait_for_url("**items=settings**")
    assert page.locator('figure.trend[data-item="settings"] circle.point').count() == WINDOWS
    page.locator('figure.trend[data-item="settings"] circle.point').first.focus()
    assert page.evaluate("document.activeElement.tagName") == "circle"
    shot(page, "keyboard-selection")
