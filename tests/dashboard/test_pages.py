"""The dashboard over real HTTP, filled by the demo's simulated users: what each page and
download says, that downloads carry exactly the stored numbers (the collector's JSON API),
that the change statistics follow from the exact variances, and that bad input is a JSON 4xx
naming the field."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

import pytest
import requests
from dashboard_site import ANALYST_TOKEN, WINDOWS, Site, desktop, sign_in

from ldptel.aggregator.reports import significance_z
from ldptel.cli.demo_data import item_names
from ldptel.cli.demo_process import serve
from ldptel.dashboard import create_app


def get(site: Site, path: str, **params: Any) -> requests.Response:
    return requests.get(f"{site.dashboard}{path}", params=params, timeout=30)


def test_the_campaign_list_shows_windows_reports_and_privacy(site: Site) -> None:
    page = get(site, "/").text
    row = page[page.index(f'<tr data-campaign="{site.campaign}"') :].split("</tr>")[0]
    assert f"<td class='windows'>{WINDOWS + 1}</td>" in row
    latest = site.window_document(site.windows[-1])["reports"][0]
    assert f"<td class='reports'>{latest['n']:,}</td>" in row
    assert "OLH" in row and "local differential privacy" in row


def test_the_trend_download_is_the_stored_numbers(site: Site) -> None:
    items = ["home", "search", "settings"]
    rows = list(
        csv.DictReader(
            io.StringIO(get(site, f"/campaigns/{site.campaign}/trend.csv", items=items).text)
        )
    )
    assert len(rows) == len(items) * len(site.windows)
    documents = {w: site.window_document(w)["reports"][0] for w in site.windows}
    for row in rows:
        report = documents[int(row["window"])]
        if report["status"] != "ok":  # shown as such, without numbers
            assert row["status"] == "not_enough_reports" and row["estimate"] == ""
            continue
        stored = next(i for i in report["items"] if i["item"] == row["item"])
        for field in ("estimate", "ci_low", "ci_high", "consistent"):
            assert float(row[field]) == stored[field]
        assert float(row["stderr"]) == pytest.approx(stored["stderr"], rel=1e-12)
    as_json = get(site, f"/campaigns/{site.campaign}/trend.json", items=items).json()
    assert [r["estimate"] for r in as_json["rows"]] == [
        None if r["estimate"] == "" else float(r["estimate"]) for r in rows
    ]


def test_the_change_is_the_difference_with_the_stderr_of_both_windows(site: Site) -> None:
    before, after = site.windows[-2], site.windows[-1]
    found = get(site, f"/campaigns/{site.campaign}/change.json").json()
    assert (found["from"], found["to"]) == (before, after)
    old = {i["item"]: i for i in site.window_document(before)["reports"][0]["items"]}
    new = {i["item"]: i for i in site.window_document(after)["reports"][0]["items"]}
    d = len(new)
    # Two-sided Bonferroni: P(|Z| > z) = false_flags / d per item.
    assert found["threshold"] == pytest.approx(significance_z(2 * d, 0.05))
    assert found["expected_false_flags"] == 0.05 and found["untested"] == ""
    assert len(found["rows"]) == d
    for row in found["rows"]:
        a, b = old[row["item"]], new[row["item"]]
        assert row["difference"] == b["estimate"] - a["estimate"]
        assert row["stderr"] == pytest.approx(math.sqrt(a["variance"] + b["variance"]))
        assert row["significant"] == (abs(row["z"]) > found["threshold"])
    # The demo's drift: the 2nd item falls and the 5th rises by ~1/3 of the change over the
    # 4 windows of 4,000 users; the page states the count and the expected false flags.
    page = get(site, f"/campaigns/{site.campaign}").text
    flagged = sum(r["significant"] for r in found["rows"])
    assert f"{flagged} of {d} items changed significantly" in page
    assert "fewer than 0.05 items are expected to be flagged by chance" in page


def test_a_window_with_too_few_reports_is_listed_not_plotted_and_not_compared(site: Site) -> None:
    first, second = site.windows[0], site.windows[1]
    page = get(site, f"/campaigns/{site.campaign}", items="home").text
    assert desktop(page).count('<circle class="point"') == WINDOWS
    assert desktop(page).count('<text class="gap"') == 1
    assert "not_enough_reports (n = 0)" in page
    found = get(site, f"/campaigns/{site.campaign}/change.json", **{"from": first, "to": second})
    assert found.json()["untested"] == "a window has too few reports"
    assert not any(r["significant"] for r in found.json()["rows"])


def test_the_search_keeps_matching_items_in_the_page_and_the_download(site: Site) -> None:
    matching = sorted(name for name in item_names(32) if "se" in name)
    assert len(matching) >= 2
    page = get(site, f"/campaigns/{site.campaign}", q="SE").text
    table = page[page.index('<table class="items"') :]
    rows = re.findall(r'<tr data-item="([^"]+)"( hidden)?>', table)
    assert len(rows) == 32
    assert sorted(item for item, hidden in rows if not hidden) == matching
    download = get(site, f"/campaigns/{site.campaign}/change.csv", q="SE").text
    assert sorted(line.split(",")[0] for line in download.splitlines()[1:]) == matching


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("/campaigns/demo-screens", {"level": "high"}, 400, "level"),
        ("/campaigns/demo-screens", {"from": "12"}, 400, "from"),
        ("/campaigns/demo-screens", {"to": "²"}, 400, "to"),
        ("/campaigns/demo-screens", {"items": [f"i{n}" for n in range(13)]}, 400, "items"),
        ("/campaigns/demo-screens", {"q": "x" * 201}, 400, "q"),
        ("/campaigns/demo-screens/trend.xml", {}, 400, "format"),
        ("/campaigns/nope", {}, 404, "campaign"),
        ("/nope", {}, 404, "path"),
    ],
)
def test_bad_input_is_a_json_error_naming_the_field(
    site: Site, path: str, params: dict[str, Any], status: int, field: str
) -> None:
    response = get(site, path, **params)
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["field"] == field


def test_with_an_analyst_token_every_request_needs_it(site: Site) -> None:
    with serve(create_app(site.client, analyst_token=ANALYST_TOKEN)) as base:
        page = f"{base}/campaigns/{site.campaign}"
        assert requests.get(f"{page}/trend.csv", timeout=10).status_code == 401
        anonymous = requests.get(page, timeout=10, allow_redirects=False)
        assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]
        bearer = {"Authorization": f"Bearer {ANALYST_TOKEN}"}
        assert requests.get(page, headers=bearer, timeout=10).status_code == 200
        session = requests.Session()
        signed_in = sign_in(base, session, f"/campaigns/{site.campaign}", ANALYST_TOKEN)
        assert (
            signed_in.status_code == 303
            and signed_in.headers["Location"] == f"/campaigns/{site.campaign}"
        )
        assert session.get(page, timeout=10).status_code == 200
        assert ANALYST_TOKEN not in str(session.cookies.get_dict())  # a random session id
        # Sign-in itself (redirects, session, CSRF, throttle): tests/dashboard/test_access.py.
