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
from dashboard_site import ANALYST_TOKEN, WINDOWS, Site

from ldptel.cli.demo_process import serve
from ldptel.dashboard import create_app

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
    """A page whose console errors (a CSP refusal among them) and failed loads fail the
    test."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda m: console_error(errors, m))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("response", lambda r: failed_load(errors, r))
        yield page
        assert errors == []  # e.g. "Refused to load ... violates Content Security Policy"
    finally:
        context.close()


def console_error(errors: list[str], message: Any) -> None:
    if message.type == "error" and not message.text.startswith("Failed to load resource"):
        errors.append(message.text)


def failed_load(errors: list[str], response: Any) -> None:
    if response.status >= 400:
        errors.append(f"{response.status} {response.url}")


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_campaign_page_draws_points_bands_and_the_gap(site: Site, page: Any) -> None:
    page.goto(f"{site.dashboard}/")
    shot(page, "campaigns")
    page.get_by_role("link", name=site.campaign).click()
    page.wait_for_url(f"**/campaigns/{site.campaign}")
    charts = page.locator("svg.trend:visible")  # each drawn twice, the desktop's shown
    assert charts.count() == 3  # the three largest items of the latest window by default
    assert page.locator("svg.trend.narrow:visible").count() == 0
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
    assert page.locator("svg.chart:visible rect.bar").count() == 32  # today's chart
    # The stylesheet is a file of this origin (the CSP allows no inline style or script).
    assert page.evaluate("getComputedStyle(document.body).maxWidth") == "1100px"
    shot(page, "campaign")


def test_sign_in_stays_on_this_site_and_sign_out_ends_the_session(site: Site, page: Any) -> None:
    with serve(create_app(site.client, analyst_token=ANALYST_TOKEN)) as base:
        page.goto(f"{base}/campaigns/{site.campaign}?items=home")
        page.wait_for_url("**/login?next=**")
        page.get_by_label("analyst token").fill(ANALYST_TOKEN)
        page.get_by_role("button", name="Open").click()
        page.wait_for_url(f"{base}/campaigns/{site.campaign}?items=home")
        assert page.locator('figure.trend[data-item="home"]').count() == 1
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{base}/login")
        page.goto(f"{base}/campaigns/{site.campaign}")
        page.wait_for_url("**/login?next=**")  # signed out: the session is gone
        page.goto(f"{base}/login?next=/%09/evil.example")  # the bypass, in Chromium
        page.get_by_label("analyst token").fill(ANALYST_TOKEN)
        page.get_by_role("button", name="Open").click()
        page.wait_for_url(f"{base}/")
        assert page.url == f"{base}/"


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
    points = page.locator('figure.trend[data-item="settings"] svg:visible circle.point')
    assert points.count() == WINDOWS
    points.first.focus()
    assert page.evaluate("document.activeElement.tagName") == "circle"
    shot(page, "keyboard-selection")
