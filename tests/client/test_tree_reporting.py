"""Memoization "tree" through the SDK and the real collector: an install reports daily for a
whole year (the collector's and the client's clock advanced together, no sleeps) without
BUDGET_EXHAUSTED, charged epsilon once for the horizon; its state survives a restart (no
second draw, no second charge); the next horizon charges again; the collector stores one
report per window, with a bit exactly in the windows its level is read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_api import ADMIN_TOKEN, Api, ServerThread
from live_collector import stored_reports
from reporter_settings import FAST

from ldptel.client import Reporter, clock
from ldptel.client.campaign import CampaignConfig
from ldptel.client.status import ReportStatus
from ldptel.client.tree import TreeShape
from ldptel.collector import create_app

DAY = 86_400
CAMPAIGN = {
    "name": "optin",
    "oracle": "de",
    "epsilon": 1.0,
    "domain": ["no", "yes"],
    "memoization": "tree",
}


@pytest.fixture
def simulated(
    redis_url: str, redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """A collector on a simulated clock (the windows it files reports in) and the client's
    view of the collector's clock on the same one; starts mid-day in a horizon's first day."""
    now = [2_000 * 365 * DAY + DAY / 2]
    app = create_app(
        {"redis_url": redis_url, "admin_token": ADMIN_TOKEN, "rate_limit": 0},
        clock=lambda: now[0],
    )
    server = ServerThread(app)
    monkeypatch.setattr(clock.ServerClock, "now", lambda self: now[0])
    api = Api(server.url)
    config_id = api.create_campaign(CAMPAIGN)
    yield {"now": now, "url": server.url, "token": api.create_token(), "config_id": config_id}
    server.stop()


def test_an_install_reports_daily_through_a_year_within_its_budget(
    simulated: dict[str, Any], tmp_path: Path, redis_client: Any
) -> None:
    now = simulated["now"]

    def reporter() -> Reporter:
        return Reporter(simulated["url"], simulated["token"], state_dir=tmp_path, **FAST)

    install = reporter()
    promise = install.guarantee("optin")
    assert promise is not None and promise.holds_for.startswith("any two value histories")
    assert promise.lifetime_epsilon == 10.0
    for day in range(365):
        if day == 180:  # a restart mid-horizon: the state is durable, nothing drawn again
            install.close()
            install = reporter()
        value = "yes" if 100 <= day < 250 else "no"
        assert install.report("optin", value) is ReportStatus.SPOOLED, day
        assert install.flush(timeout=10)
        assert install.privacy_spent("optin").lifetime_epsilon == 1.0  # once per horizon
        now[0] += DAY
    assert install.report("optin", "no") is ReportStatus.SPOOLED  # the next horizon
    assert install.privacy_spent("optin").lifetime_epsilon == 2.0
    assert install.flush(timeout=10)
    config = CampaignConfig.from_dict(CAMPAIGN).as_created()
    stored = stored_reports(redis_client, config)
    assert len(stored) == 366
    shape = TreeShape(365, 2, 1.0)
    first_year = stored[:365]
    assert len({(r["item"], r["level"]) for r in first_year}) == 1  # one horizon's draws
    level = first_year[0]["level"]
    with_bit = [t for t, r in enumerate(first_year) if "bit" in r]
    assert with_bit == [t for t in range(365) if shape.read_level(t) == level]
    install.close()


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"item": 0, "level": 9}, "level"),  # T = 365: levels 0..8
        ({"item": 1, "level": 0}, "item"),  # a binary campaign tracks one item
        ({"item": 0, "level": 0, "bit": 2}, "bit"),
        ({"item": 0, "level": 0, "y": 1}, "y"),
    ],
)
def test_the_collector_refuses_a_bad_tree_report_naming_the_field(
    simulated: dict[str, Any], report: dict[str, Any], field: str
) -> None:
    body = {"campaign": "optin", "config_id": simulated["config_id"], "reports": [report]}
    answer = Api(simulated["url"]).post_reports(simulated["token"], body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == f"reports[0].{field}"
