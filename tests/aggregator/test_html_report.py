"""The HTML report is self-contained and renders its chart and numbers in a real browser
(Debian's Chromium, headless, driven by Playwright; no browser download)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromium import CHROMIUM, launch
from stream_entries import make_config, register, simulate

from ldptel.aggregator.html import axis_title, nice_step, render_html
from ldptel.aggregator.reports import ReportOptions, build_window
from ldptel.aggregator.worker import Worker
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's page tests (a launch takes seconds)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch(playwright)
        yield launched
        launched.close()


@pytest.fixture
def document(redis_client: Any) -> dict[str, Any]:
    config = make_config(domain=["home", "search", "feed", "<profile>", "settings", "help"])
    register(redis_client, config)
    values = np.random.default_rng(3).choice(6, size=20_000, p=[0.5, 0.2, 0.15, 0.1, 0.05, 0])
    simulate(redis_client, config, values, window=WINDOW, batch_size=1000)
    Worker(redis_client).run_pass()
    return build_window(redis_client, Registry(redis_client), config.name, WINDOW)


def test_the_page_is_self_contained_and_escapes_labels(document: dict[str, Any]) -> None:
    page = render_html(document)
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "&lt;profile&gt;" in page and "<profile>" not in page
    assert "<svg" in page and page.count('class="bar ') == 6
    assert '<text class="axis-title"' in page
    assert axis_title(0.95) == ("estimated count of reports per item, with 95% confidence interval")


def test_a_window_without_enough_reports_shows_the_status(redis_client: Any) -> None:
    config = make_config()
    register(redis_client, config)
    page = render_html(build_window(redis_client, Registry(redis_client), config.name, WINDOW))
    assert "not enough reports" in page and "<svg" not in page


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_chromium_renders_the_chart_and_the_numbers(
    document: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(document), encoding="utf-8")
    items = document["reports"][0]["items"]
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        page.goto(page_file.as_uri())
        bars = page.locator("svg.chart rect.bar")
        assert bars.count() == len(items)
        for index in range(bars.count()):
            box = bars.nth(index).bounding_box()
            assert box is not None and box["width"] > 0 and box["height"] > 0
        assert page.locator("svg.chart line.ci").count() == 3 * len(items)
        # The largest estimate's bar is the widest.
        widths = [bars.nth(i).bounding_box()["width"] for i in range(bars.count())]  # type: ignore[index]
        assert widths[0] == max(widths)
        table = page.locator("table.items")
        for item in items:
            row = table.locator(f'tr[data-item="{item["item"]}"]')
            assert row.locator("td.estimate").inner_text() == f"{item['estimate']:,.0f}"
            assert row.locator("td.consistent").inner_text() == f"{item['consistent']:,.0f}"
        assert "differentially private" in page.locator(".privacy").inner_text()
        # The x axis says what the numbers are, inside the drawn chart.
        title = page.locator("svg.chart text.axis-title")
        assert title.text_content() == axis_title(0.95)
        chart_box, title_box = page.locator("svg.chart").bounding_box(), title.bounding_box()
        assert chart_box is not None and title_box is not None
        assert title_box["y"] + title_box["height"] <= chart_box["y"] + chart_box["height"]
        # Without colour (grayscale, or colour blindness): significant bars are solid and
        # the others white with a dashed outline, so the two never look alike.
        styles = bars.evaluate_all(
            "bars => bars.map(b => { const s = getComputedStyle(b);"
            " return [b.classList.contains('significant'), s.fill, s.strokeDasharray]; })"
        )
        kinds = {(significant, fill, dashes) for significant, fill, dashes in styles}
        assert {k[0] for k in kinds} == {True, False}  # the data has both kinds
        assert kinds == {
            (True, "rgb(31, 79, 176)", "none"),
            (False, "rgb(255, 255, 255)", "4px, 2px"),
        }
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    finally:
        page.close()


@pytest.fixture
def numeric_document(redis_client: Any) -> dict[str, Any]:
    """A window of a numeric campaign with a distribution mechanism (sw): mean and histogram."""
    config = make_config("latency", oracle="sw", range=[0, 2000]).as_created()
    register(redis_client, config)
    values = np.random.default_rng(3).lognormal(5.0, 1.0, size=10_000)
    simulate(redis_client, config, values, window=WINDOW, batch_size=1000)
    Worker(redis_client).run_pass()
    return build_window(redis_client, Registry(redis_client), config.name, WINDOW)


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_chromium_renders_the_mean_its_interval_and_the_histogram(
    numeric_document: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    page_file = tmp_path / "numeric.html"
    page_file.write_text(render_html(numeric_document), encoding="utf-8")
    numeric = numeric_document["reports"][0]["numeric"]
    buckets = numeric["distribution"]["buckets"]
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        page.goto(page_file.as_uri())
        dot = page.locator("svg.mean-chart circle.mean").bounding_box()
        whiskers = page.locator("svg.mean-chart line.ci").first.bounding_box()
        assert dot is not None and whiskers is not None
        # The dot sits inside its interval (the interval may be narrower than the dot).
        assert (
            whiskers["x"] - 8
            <= dot["x"] + dot["width"] / 2
            <= whiskers["x"] + 8 + (whiskers["width"])
        )
        heights = page.eval_on_selector_all(
            "svg.distribution-chart rect.bucket",
            "bars => bars.map(bar => bar.getBoundingClientRect().height)",
        )  # one round trip for every bar
        assert len(heights) == len(buckets)
        tallest = max(range(len(buckets)), key=lambda i: buckets[i]["probability"])
        assert heights[tallest] == max(heights) > 0
        cdf = page.locator("svg.distribution-chart polyline.cdf").bounding_box()
        assert cdf is not None and cdf["height"] > 100  # rises from 0 to 1
        estimate = f"{numeric['mean']['estimate']:,.4g}"
        assert page.locator("table.mean td.estimate").inner_text() == estimate
        assert page.locator("table.quantiles tr[data-q='0.5']").count() == 1
        page.screenshot(path=str(tmp_path / "numeric.png"), full_page=True)
    finally:
        page.close()


def test_consistency_choice_shows_in_the_page(redis_client: Any, document: Any) -> None:
    registry = Registry(redis_client)
    clipped = build_window(
        redis_client, registry, "screens", WINDOW, ReportOptions(consistency="clip")
    )
    assert "consistent (clip)" in render_html(clipped)


def test_ticks_are_round_numbers() -> None:
    assert [nice_step(span) for span in (7.0, 100.0, 31_348.0, 0.9)] == [2.0, 50.0, 10_000.0, 0.5]


def test_the_page_shows_the_key_numbers_and_true_counts_when_known(
    document: dict[str, Any],
) -> None:
    page = render_html(document)
    assert '<div class="value">20,000</div><div class="label">reports</div>' in page
    assert "true count" not in page and 'class="truth"' not in page

    for number, item in enumerate(document["reports"][0]["items"]):
        item["true_count"] = 1000 * number  # the demo adds its simulated data's counts
    page = render_html(document)
    assert page.count('<path class="truth"') == 6 and "<th>true count</th>" in page
    assert '<tr data-item="feed">' in page and '<td class="truth">2,000</td>' in page
