"""A breakdown campaign end to end: created with oracle "auto" over os x plan x country
(4 x 3 x 5) at epsilon 2, reported by real SDK installs (`report(campaign, {"os": ...})`) and
by batches of randomized rows through the real collector, aggregated by the worker; the
window report holds every one-way and two-way marginal, each cell within its stated stderr
of the truth, and renders as JSON, table, CSV and HTML."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from collector_api import ADMIN_TOKEN, Api, ServerThread
from reporter_settings import FAST

from ldptel.aggregator.csv_export import render_csv
from ldptel.aggregator.html import render_html
from ldptel.aggregator.model import from_json, to_json
from ldptel.aggregator.reports import build_window, list_windows
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.analysis.breakdown import simulated_rows
from ldptel.client import Reporter
from ldptel.client.campaign import CampaignConfig
from ldptel.client.campaign_kinds import Breakdown
from ldptel.client.errors import LdptelError
from ldptel.client.status import ReportStatus
from ldptel.collector import create_app
from ldptel.store.registry import Registry

ATTRIBUTES = {
    "os": ["android", "ios", "web", "desktop"],
    "plan": ["free", "pro", "team"],
    "country": ["us", "de", "fr", "jp", "br"],
}
CAMPAIGN = {"name": "crashes", "oracle": "auto", "epsilon": 2.0, "attributes": ATTRIBUTES}
USERS = 6_000
INSTALLS = [
    {"os": "ios", "plan": "pro", "country": "jp"},
    {"os": "web", "plan": "free", "country": "us"},
]


@pytest.fixture
def collector(
    redis_url: str, redis_client: Any, request: pytest.FixtureRequest
) -> Iterator[dict[str, Any]]:
    """The collector with the campaign (after redis_client, which empties the server), its
    oracle "auto" unless the test names one (indirect parametrization)."""
    app = create_app({"redis_url": redis_url, "admin_token": ADMIN_TOKEN, "rate_limit": 0})
    server = ServerThread(app)
    api = Api(server.url)
    config_id = api.create_campaign({**CAMPAIGN, "oracle": getattr(request, "param", "auto")})
    yield {"api": api, "url": server.url, "token": api.create_token(), "config_id": config_id}
    server.stop()


def served_config(redis_client: Any) -> CampaignConfig:
    config = Registry(redis_client).current_config("crashes")
    assert config is not None and isinstance(config.kind, Breakdown)
    return config


def test_sdk_installs_report_a_row_and_refuse_bad_ones_with_a_status(
    collector: dict[str, Any], tmp_path: Path, redis_client: Any
) -> None:
    errors: list[LdptelError] = []
    settings = {**FAST, "strict": False, "on_error": errors.append}
    for i, row in enumerate(INSTALLS):
        install = Reporter(
            collector["url"], collector["token"], state_dir=tmp_path / str(i), **settings
        )
        assert install.report("crashes", row) is ReportStatus.SPOOLED
        assert install.flush(timeout=10)
        install.close()
    install = Reporter(collector["url"], collector["token"], state_dir=tmp_path / "bad", **settings)
    missing = {"os": "ios", "plan": "pro"}
    unknown = {"os": "ios", "plan": "gold", "country": "jp"}
    for value in (missing, unknown, "ios"):
        assert install.report("crashes", value) is not ReportStatus.SPOOLED  # type: ignore[arg-type]
    install.close()
    assert [e.field for e in errors] == ["value.country", "value.plan", "value"]
    assert served_config(redis_client).oracle in ("joint", "pairs")


def test_the_collector_names_the_report_and_field_it_refuses(collector: dict[str, Any]) -> None:
    body = {"campaign": "crashes", "config_id": collector["config_id"]}
    for bad, field in (({"pair": 99, "y": 0}, "reports[1].pair"), ({"pair": 0}, "reports[1].y")):
        good = {"pair": 0, "y": 0}
        response = collector["api"].post_reports(
            collector["token"], {**body, "reports": [good, bad]}
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["field"] == field


@pytest.mark.parametrize(
    ("collector", "field"),
    [("split", "reports[1].plan.y"), ("hadamard", "reports[1].coef")],
    indirect=["collector"],
)
def test_the_collector_names_the_field_of_split_and_hadamard_reports(
    collector: dict[str, Any], field: str
) -> None:
    body = {"campaign": "crashes", "config_id": collector["config_id"]}
    if field.endswith("coef"):
        good, bad = {"coef": 0, "bit": 1}, {"coef": 64, "bit": 0}
    else:
        good = {"os.y": 0, "plan.y": 0, "country.y": 0}
        bad = {**good, "plan.y": 3}
    for report, name, code in ((bad, field, 400), ({**good, "pair": 0}, "reports[1].pair", 400)):
        response = collector["api"].post_reports(
            collector["token"], {**body, "reports": [good, report]}
        )
        assert response.status_code == code, response.text
        assert response.json()["error"]["field"] == name


@pytest.mark.parametrize("collector", ["auto", "split", "hadamard"], indirect=True)
def test_the_window_report_holds_every_marginal_within_its_stated_error(
    collector: dict[str, Any], redis_client: Any
) -> None:
    config = served_config(redis_client)
    mechanism = config.build_mechanism()
    attributes = config.kind.attributes  # type: ignore[union-attr]
    rows = simulated_rows(attributes, USERS, np.random.default_rng(5))
    joint = attributes.joint_index(rows)
    for start in range(0, USERS, 1000):
        reports = [mechanism.perturb(int(i)) for i in joint[start : start + 1000]]
        body = {"campaign": "crashes", "config_id": collector["config_id"], "reports": reports}
        assert collector["api"].post_reports(collector["token"], body).status_code == 202
    Worker(redis_client).run_pass()
    registry = Registry(redis_client)
    [window] = list_windows(redis_client, registry, "crashes")
    document = build_window(redis_client, registry, "crashes", window)
    assert from_json(to_json(document)) == document  # the model's checks hold
    [report] = document["reports"]
    assert report["n"] == USERS and report["oracle"] == config.oracle
    section = report["breakdown"]
    assert list(section["attributes"]) == ["country", "os", "plan"]
    marginals = {tuple(m["attributes"]): m for m in section["marginals"]}
    assert set(marginals) == {
        ("country",),
        ("os",),
        ("plan",),
        *itertools.combinations(["country", "os", "plan"], 2),
    }
    z2 = []
    for names, marginal in marginals.items():
        positions = attributes.positions(names)
        truth = np.bincount(
            np.ravel_multi_index(rows[:, positions].T, [attributes.sizes[p] for p in positions]),
            minlength=len(marginal["cells"]),
        )
        for cell, true in zip(marginal["cells"], truth.tolist(), strict=True):
            assert cell["ci_low"] < cell["estimate"] < cell["ci_high"]
            assert cell["consistent"] >= 0
            if len(names) == 2:
                z2.append(((cell["estimate"] - true) / cell["stderr"]) ** 2)
    # 47 two-way cells; E z^2 = 1 (the variance is exact at the true frequencies, estimated
    # at the estimated ones); the mean of 47 such z^2 has sd ~0.2: [0.4, 1.9] is beyond 3 sd.
    assert 0.4 <= float(np.mean(z2)) <= 1.9 and max(z2) < 25
    text = format_window(document)
    assert "os x plan" in text and "ios | pro" in text
    rendered = list(csv.reader(io.StringIO(render_csv(document))))
    assert len(rendered) == 1 + sum(len(m["cells"]) for m in section["marginals"])
    assert "breakdown-heatmap" in render_html(document)
