"""The dashboard on a phone, in a real headless Chromium at 390 CSS px (an iPhone 12-14's
width, 3 device pixels a CSS pixel, touch): nothing wider than the screen, chart labels as
large as the page's small print, and the first screen shows data, not only privacy text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chromium import launch
from dashboard_site import Site

WIDTH, HEIGHT = 390, 844
#: The smallest rendered chart label, in CSS px: the size of fine print (WCAG has no fixed
#: minimum; 10 px is where browsers' own minimum-font-size settings start).
MIN_LABEL_PX = 10.0

# Every SVG text's rendered size: its font size times the SVG's scale (viewBox to screen).
LABEL_SIZES = """() => [...document.querySelectorAll('svg text')].filter(t => t.getBBox().width > 0)
  .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""


@pytest.fixture(scope="module")
def phone(site: Site) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(
                viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=3,
                is_mobile=True, has_touch=True,
            )  # fmt: skip
            yield context.new_page()
        finally:
            browser.close()


@pytest.mark.parametrize("path", ["/", "campaign"])
def test_a_page_fits_a_phones_width_with_readable_labels(site: Site, phone: Any, path: str) -> None:
    phone.goto(site.dashboard + ("/" if path == "/" else f"/campaigns/{site.campaign}"))
    assert phone.evaluate("window.innerWidth") == WIDTH  # laid out at the phone's width...
    overflow = phone.evaluate("document.documentElement.scrollWidth")
    assert overflow <= WIDTH, f"the page is {overflow} px wide"  # ...and nothing wider
    sizes = phone.evaluate(LABEL_SIZES)
    if path != "/":
        assert sizes, "the campaign page has charts"
    assert min(sizes, default=MIN_LABEL_PX) >= MIN_LABEL_PX, sorted(sizes)[:5]


def test_the_first_screen_of_a_campaign_shows_a_chart(site: Site, phone: Any) -> None:
    phone.goto(f"{site.dashboard}/campaigns/{site.campaign}")
    top = phone.evaluate("document.querySelector('svg').getBoundingClientRect().top")
    assert top < HEIGHT, f"the first chart starts {top} px down, below the first screen"
