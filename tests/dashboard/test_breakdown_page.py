"""The dashboard for a breakdown campaign: its page shows the shown window's marginals (the
two-way ones as heatmaps, each cell's estimate and interval as the stored report has them),
and no view of it answers 5xx, through the real pipeline (perturbed reports -> worker ->
stored documents)."""

from __future__ import annotations

from typing import Any

import numpy as np
import requests
from test_numeric_and_open_domain import DAY, WINDOW, append

from ldptel.aggregator.reports import load_window
from ldptel.aggregator.table import count_text
from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.client.campaign import CampaignConfig
from ldptel.dashboard import create_app
from ldptel.store.registry import Registry

ATTRIBUTES = {"os": ["android", "ios", "web"], "plan": ["free", "pro"]}


def breakdown_campaign(client: Any) -> CampaignConfig:
    """A pairs campaign over os x plan, 3,000 users in each of two windows."""
    config = CampaignConfig.from_dict(
        {"name": "crashes", "oracle": "pairs", "epsilon": 2.0, "attributes": ATTRIBUTES}
    ).as_created()
    Registry(client).create(config)
    mechanism = config.build_mechanism()
    rng = np.random.default_rng(1)
    for day in range(2):
        rows = rng.choice(6, 3000, p=[0.3, 0.1, 0.2, 0.1, 0.2, 0.1])
        append(client, config, mechanism.perturb_batch(rows, rng), WINDOW + day * DAY)
    Worker(client).run_pass()
    return config


def test_a_breakdown_campaign_page_shows_its_cross_tab(redis_client: Any) -> None:
    breakdown_campaign(redis_client)
    stored = load_window(redis_client, "crashes", WINDOW + DAY)
    assert stored is not None
    [cross_tab] = [
        m for m in stored["reports"][0]["breakdown"]["marginals"] if len(m["attributes"]) == 2
    ]
    with serve(create_app(redis_client)) as base:
        page = requests.get(f"{base}/campaigns/crashes", timeout=30)
        assert page.status_code == 200
        assert 'class="breakdown-heatmap" data-marginal="os x plan"' in page.text
        for cell in cross_tab["cells"]:
            assert f"{count_text(cell['estimate'])}<br>" in page.text
            assert f"[{count_text(cell['ci_low'])}, {count_text(cell['ci_high'])}]" in page.text
        for path in ("trend.json", "trend.csv", f"change.json?from={WINDOW}&to={WINDOW + DAY}"):
            assert requests.get(f"{base}/campaigns/crashes/{path}", timeout=30).status_code == 200
