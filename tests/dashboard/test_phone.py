"""The dashboard on a phone and on a desktop, in a real headless Chromium: at 390 CSS px (an
iPhone 12-14's width, 3 device pixels a CSS pixel, touch) and at 1280 px, every page keeps
the screen's width (nothing overflows sideways), every visible chart label renders at 11 px
or more, and a campaign's first screen shows its estimates (a chart), with the privacy
statement collapsed below them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chromium import launch
from dashboard_site import COLORS, LATENCY, Site

PHONE, DESKTOP = (390, 844), (1280, 900)
#: The smallest rendered chart label, in CSS px (the page's small print is ~13 px).
MIN_LABEL_PX = 11.0

# Every visible SVG text's rendered size: its font size times the SVG's scale (viewBox to
# screen); the drawing of the other width is not displayed.
LABEL_SIZES = """() => [...document.querySelectorAll('svg text')]
  .filter(t => t.closest('svg').checkVisibility() && t.getBBox().width > 0)
  .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""
FIRST_CHART_TOP = """() => [...document.querySelectorAll('svg')].find(s => s.checkVisibility())
  .getBoundingClientRect().top"""
PRIVACY_AFTER_CHART = """() => {
  const chart = [...document.querySelectorAll('svg')].find(s => s.checkVisibility());
  const privacy = document.querySelector('details.privacy');
  return !privacy.open
    && !!(chart.compareDocumentPosition(privacy) & Node.DOCUMENT_POSITION_FOLLOWING);
}"""


@pytest.fixture(scope="module", params=["phone", "desktop"])
def screen(request: Any, site: Site) -> Iterator[tuple[Any, int, int]]:
    from playwright.sync_api import sync_playwright

    width, height = PHONE if request.param == "phone" else DESKTOP
    phone = request.param == "phone"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(
                viewport={"width": width, "height": height}, device_scale_factor=3 if phone else 1,
                is_mobile=phone, has_touch=phone,
            )  # fmt: skip
            page = context.new_page()
            errors: list[str] = []  # a CSP refusal (inline script or style) among them
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page, width, height
            assert errors == []
        finally:
            browser.close()


def pages(site: Site) -> list[str]:
    return [
        "/",
        f"/campaigns/{site.campaign}",
        f"/campaigns/{site.campaign}?scale=percent&items=home&items=feed",
        f"/campaigns/{COLORS}",
        f"/campaigns/{LATENCY}",
    ]


@pytest.mark.parametrize("number", range(5))
def test_a_page_fits_the_screen_with_readable_labels(
    site: Site, screen: tuple[Any, int, int], number: int
) -> None:
    page, width, _ = screen
    path = pages(site)[number]
    page.goto(site.dashboard + path)
    assert page.evaluate("window.innerWidth") == width  # laid out at the screen's width...
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"{path} is {overflow} px wide"  # ...and nothing wider
    sizes = page.evaluate(LABEL_SIZES)
    if path != "/":
        assert sizes, "a campaign page has charts"
    assert min(sizes, default=MIN_LABEL_PX) >= MIN_LABEL_PX, (path, sorted(sizes)[:5])
    charts = page.locator("svg:visible").count()
    assert charts == page.locator("svg").count() // 2  # one drawing of each chart shown


@pytest.mark.parametrize("campaign", ["screens", COLORS, LATENCY])
def test_the_first_screen_shows_the_estimates_before_the_privacy_text(
    site: Site, screen: tuple[Any, int, int], campaign: str
) -> None:
    page, _, height = screen
    page.goto(f"{site.dashboard}/campaigns/{site.campaign if campaign == 'screens' else campaign}")
    top = page.evaluate(FIRST_CHART_TOP)
    assert top < height * 0.75, f"the first chart starts {top} px down"
    assert page.evaluate(PRIVACY_AFTER_CHART)  # collapsed, and below the chart
