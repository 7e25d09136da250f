"""What analysts' other tools do, on the dashboard over real HTTP (the `site` fixture): the
candidates of a dictionary campaign with the share of the reports they explain, estimates
in percent of the window's reports, relative and absolute window spans, config changes
marked on the trends, and a numeric page that names its units, its standard error and
clips its interval to the range."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import requests
from dashboard_site import COLORS, LATENCY, Site, desktop

from ldptel.cli.demo_process import serve
from ldptel.dashboard import create_app

DAY = 86_400
Z95 = 1.959963984540054


def get(base: str, path: str, **params: Any) -> requests.Response:
    response = requests.get(f"{base}{path}", params=params, timeout=30)
    response.raise_for_status()
    return response


def test_a_dictionary_campaign_lists_its_candidates_and_the_share_they_explain(
    site: Site,
) -> None:
    """The issue's `demo --scenario favorite-color --dashboard`: the stored reports carry the
    campaign's dictionary (store/candidates.py), so the page lists what the CLI lists."""
    latest = max(get(site.dashboard, f"/campaigns/{COLORS}/trend.json").json()["rows"],
                 key=lambda row: row["window"])["window"]  # fmt: skip
    (report,) = site.window_document(latest, COLORS)["reports"]
    discovery, items = report["discovery"], report["items"]
    assert discovery["candidates"] == 148 and len(items) >= 5  # the demo's common colours
    page = get(site.dashboard, f"/campaigns/{COLORS}").text
    assert f"{len(items)} of 148 candidates (the CSS colour names" in page
    table = page[page.index('<table class="items"') :]
    listed = re.findall(r'<tr data-item="([^"]+)"', table)
    assert sorted(listed) == sorted(item["item"] for item in items)
    assert re.search(r"\binf\b", page) is None  # no "|z| > inf", no "0 of 0"
    # The share explained: the sum of the estimates over n, +- z times the sum of stderrs.
    total = sum(item["estimate"] for item in items)
    bound = Z95 * sum(item["stderr"] for item in items)
    n = report["n"]
    low, high = max(total - bound, 0) / n, min(total + bound, n) / n
    assert (
        f"The {len(items)} listed strings explain an estimated {total / n:.1%} of the "
        f"{n:,} reports (95% interval {low:.1%} to {high:.1%}" in page
    )
    # Every string is listed in both windows' reports or compared only where it is.
    change = get(site.dashboard, f"/campaigns/{COLORS}/change.json").json()
    assert change["threshold"] is not None and change["rows"]


def test_percent_of_reports_scales_estimates_intervals_and_changes(site: Site) -> None:
    path, items = f"/campaigns/{site.campaign}", ["home", "search"]
    counts = get(site.dashboard, f"{path}/trend.json", items=items).json()
    shares = get(site.dashboard, f"{path}/trend.json", items=items, scale="percent").json()
    assert counts["unit"] == "estimated count" and shares["unit"] == "% of reports"
    for count, share in zip(counts["rows"], shares["rows"], strict=True):
        if count["estimate"] is None:
            assert share["estimate"] is None
            continue
        factor = 100 / count["n"]
        for field in ("estimate", "stderr", "ci_low", "ci_high", "consistent"):
            assert share[field] == pytest.approx(count[field] * factor, rel=1e-12)
    # The change of shares: n is known exactly, so Var(e / n) = Var(e) / n^2 per window.
    before, after = site.windows[-2], site.windows[-1]
    documents = [site.window_document(w)["reports"][0] for w in (before, after)]
    found = get(site.dashboard, f"{path}/change.json", scale="percent").json()
    assert found["unit"] == "% of reports"
    for row in found["rows"]:
        old, new = ({i["item"]: i for i in d["items"]}[row["item"]] for d in documents)
        f_old, f_new = 100 / documents[0]["n"], 100 / documents[1]["n"]
        assert row["difference"] == pytest.approx(
            new["estimate"] * f_new - old["estimate"] * f_old, rel=1e-9, abs=1e-12
        )
        stderr = math.hypot(old["stderr"] * f_old, new["stderr"] * f_new)
        assert row["stderr"] == pytest.approx(stderr, rel=1e-9)
    page = get(site.dashboard, path, scale="percent").text
    assert "estimate (unbiased, % of reports)" in page and 'class="unit"' in page
    assert get_error(site, path, scale="share") == ("scale", 400)
    assert get_error(site, f"/campaigns/{LATENCY}", scale="percent")[0] == "scale"


def get_error(site: Site, path: str, **params: Any) -> tuple[str, int]:
    response = requests.get(f"{site.dashboard}{path}", params=params, timeout=30)
    return response.json()["error"]["field"], response.status_code


def test_relative_and_absolute_spans_choose_the_windows_shown(site: Site) -> None:
    last = site.windows[-1]
    # "Last 7 days" ends at the dashboard's clock: 5.5 days after the last window's start
    # it holds the windows starting after last - 1.5 days, i.e. the last two.
    with serve(create_app(site.client, clock=lambda: last + 5.5 * DAY)) as base:
        path = f"/campaigns/{site.campaign}"
        rows = get(base, f"{path}/trend.json", items="home", period="7d").json()["rows"]
        assert [row["window"] for row in rows] == site.windows[-2:]
        rows = get(base, f"{path}/trend.json", items="home", period="30d").json()["rows"]
        assert [row["window"] for row in rows] == site.windows
        page = get(base, path, period="7d").text
        assert '<option value="7d" selected>last 7 days</option>' in page
    dates = [time_text(w) for w in (site.windows[1], site.windows[3])]
    path = f"/campaigns/{site.campaign}/trend.json"
    rows = get(site.dashboard, path, items="home", since=dates[0], until=dates[1]).json()["rows"]
    assert [row["window"] for row in rows] == site.windows[1:4]
    # A compared window outside the span falls back to the span's default; a bad date or a
    # period with dates is a JSON 400 naming the field.
    shown = get(site.dashboard, f"/campaigns/{site.campaign}/change.json",
                since=dates[0], until=dates[1], **{"from": site.windows[0]}).json()  # fmt: skip
    assert (shown["from"], shown["to"]) == (site.windows[2], site.windows[3])
    assert get_error(site, f"/campaigns/{site.campaign}", since="2026-13-01") == ("since", 400)
    assert get_error(site, f"/campaigns/{site.campaign}", period="7d", until=dates[1])[0] == (
        "period"
    )
    assert get_error(site, f"/campaigns/{site.campaign}", period="1y")[0] == "period"


def time_text(window: int) -> str:
    from ldptel.store.reports import iso

    return iso(window)[:10]


def test_a_config_change_is_marked_between_its_windows(site: Site) -> None:
    old, new = site.latency_configs
    page = desktop(get(site.dashboard, f"/campaigns/{LATENCY}").text)
    (mark,) = re.findall(r'<g class="config-change" data-window="(\d+)">.*?</g>', page, re.S)
    assert int(mark) == site.latency_windows[2]
    assert f"{old} to {new}" in page and "config changed" in page
    assert "the campaign's config changed between two windows" in page
    # One mark per trend, none on a campaign whose config never changed.
    assert 'class="config-change"' not in get(site.dashboard, f"/campaigns/{site.campaign}").text
    rows = get(site.dashboard, f"/campaigns/{LATENCY}/trend.json").json()["rows"]
    assert [row["config_id"] for row in rows] == [old, old, new]


def test_a_numeric_page_names_its_units_stderr_and_clips_its_interval(site: Site) -> None:
    window = site.latency_windows[-1]
    (report,) = site.window_document(window, LATENCY)["reports"]
    mean = report["numeric"]["mean"]
    assert mean["ci_low"] < 0  # the situation of the issue: the interval runs below 0
    page = get(site.dashboard, f"/campaigns/{LATENCY}").text
    assert "standard error of the mean" in page and " ± " not in page
    high = min(mean["ci_high"], 2000)
    assert f"[0, {high:,.4g}]" in page  # the clipped interval, in the tile and the chart
    assert f"the computed one is [{mean['ci_low']:,.4g}, {mean['ci_high']:,.4g}]" in page
    # The histogram has a y axis with its unit, and the CDF its own on the right.
    chart = desktop(page)[desktop(page).index('class="chart distribution-chart') :]
    chart = chart[: chart.index("</svg>")]
    assert "% of users per bucket" in chart and "CDF, % (line)" in chart
    assert chart.count('class="cdf-tick"') == 5 and "reported value" in chart
    # The trend's band is clipped too (the downloads keep the stored numbers).
    table = page[page.index('<table class="trend-numbers"') :].split("</table>")[0]
    lows = [float(v.replace(",", "")) for v in re.findall(r"<td>\[(-?[\d.,e+-]+), ", table)]
    assert lows and min(lows) >= 0
    rows = get(site.dashboard, f"/campaigns/{LATENCY}/trend.json").json()["rows"]
    assert rows[-1]["ci_low"] == mean["ci_low"]
    # The footer and the tables speak of a mean, not of counts or consistent values.
    footer = page[page.index('<p class="note footer">') :]
    assert "mean" in footer and "count" not in footer and "consistent" not in footer
    assert "consistent (biased)" not in page
