"""The report model (aggregator/model.py): a window built from real Redis state survives JSON
both ways, is checked field by field when read back, renders the same page and table from
JSON as from the build, and is exactly what the collector's HTTP API serves."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import requests
from stream_entries import make_config, register, simulate

from ldptel.aggregator.html import render_html
from ldptel.aggregator.model import WindowDocument, from_json, to_json
from ldptel.aggregator.reports import build_window, load_window, store_window
from ldptel.aggregator.table import format_window
from ldptel.aggregator.typed_json import DocumentError
from ldptel.aggregator.worker import Worker
from ldptel.cli.demo_process import serve
from ldptel.client.campaign import CampaignConfig
from ldptel.collector import create_app
from ldptel.store import codec, keys
from ldptel.store.registry import Registry
from ldptel.store.reports import parse_window

WINDOW = 1_700_006_400
FREQUENCIES = [0.4, 0.3, 0.1, 0.1, 0.1, 0.0, 0.0, 0.0]
ADMIN = "admin-token-0123456789"


def values(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).choice(len(FREQUENCIES), size=n, p=FREQUENCIES)


def plain(client: Any) -> CampaignConfig:
    """One DE config, one report with the shuffle-amplified guarantee."""
    config = make_config("plain")
    register(client, config)
    simulate(client, config, values(5000), window=WINDOW)
    return config


def rappor(client: Any) -> CampaignConfig:
    """Full RAPPOR: the decoder's fit and the `rappor` privacy fields."""
    config = make_config("rappor", oracle="rappor", epsilon=1.1, params={"f": 0.5})
    register(client, config)
    simulate(client, config, values(5000), window=WINDOW, batch_size=1000)
    return config


def leveled(client: Any) -> CampaignConfig:
    """Privacy levels: the combined report (levels table, per-level privacy), then one per
    level."""
    config = make_config("leveled", epsilon=2.0, levels={"high": 0.5, "low": 2.0})
    register(client, config)
    rng = np.random.default_rng(4)
    for level, n in (("high", 2000), ("low", 3000)):
        oracle = config.level_oracle(level)
        assert oracle is not None
        batch = oracle.perturb_batch(values(n), rng)
        entry = codec.StreamEntry(config.config_id, WINDOW, n, oracle.pack(batch), level)
        client.xadd(keys.stream(config.name, 0), codec.encode(entry))
    return config


def too_few(client: Any) -> CampaignConfig:
    """ "Not enough reports": no items."""
    config = make_config("few")
    register(client, config)
    simulate(client, config, values(50), window=WINDOW)
    return config


WINDOWS: dict[str, Callable[[Any], CampaignConfig]] = {
    "plain": plain,
    "rappor": rappor,
    "levels": leveled,
    "not-enough": too_few,
}


def built(client: Any, setup: Callable[[Any], CampaignConfig]) -> WindowDocument:
    """The window document of a campaign aggregated from real stream entries."""
    config = setup(client)
    Worker(client, build_reports=False).run_pass()
    return build_window(client, Registry(client), config.name, WINDOW, built_at=WINDOW + 60)


@pytest.mark.parametrize("setup", WINDOWS.values(), ids=WINDOWS.keys())
def test_a_built_window_survives_json_both_ways(
    redis_client: Any, setup: Callable[[Any], CampaignConfig]
) -> None:
    document = built(redis_client, setup)

    assert from_json(to_json(document)) == document
    assert from_json(to_json(document, indent=2)) == document
    store_window(redis_client, document)
    assert load_window(redis_client, document["campaign"], WINDOW) == document


def test_the_model_declares_what_the_builds_write(redis_client: Any) -> None:
    """Every optional part of the model occurs in a real build (none is dead), and from_json
    rejects any field the model lacks (so none is undeclared)."""
    documents = [built(redis_client, setup) for setup in WINDOWS.values()]
    reports = [report for document in documents for report in document["reports"]]

    assert {report["status"] for report in reports} == {"ok", "not_enough_reports"}
    assert any("combined" in report for report in reports)
    assert any("levels" in report["privacy"] for report in reports)
    assert any("rappor" in report["privacy"] for report in reports)
    assert any("permanent_epsilon" in report["privacy"] for report in reports)
    assert any(report["privacy"]["central"] is None for report in reports)
    assert any(report["privacy"]["central"] for report in reports)
    assert all(report["items"] for report in reports if report["status"] == "ok")


def broken(document: WindowDocument, change: Callable[[dict[str, Any]], None]) -> str:
    """The document's JSON after `change` to the first item of the first report."""
    raw: dict[str, Any] = copy.deepcopy(dict(document))
    change(raw["reports"][0]["items"][3])
    return json.dumps(raw)


def test_a_document_that_does_not_match_the_model_is_refused_naming_the_field(
    redis_client: Any,
) -> None:
    document = built(redis_client, plain)
    where = "document.reports[0].items[3]"

    cases: list[tuple[Callable[[dict[str, Any]], None], str]] = [
        (lambda item: item.pop("stderr"), f"{where}: missing field 'stderr'"),
        (lambda item: item.update(significant=1), f"{where}.significant: expected bool, got 1"),
        (lambda item: item.update(estimate="12"), f"{where}.estimate: expected float"),
        (lambda item: item.update(index=True), f"{where}.index: expected int, got True"),
        (lambda item: item.update(colour="red"), f"{where}: unknown field 'colour'"),
    ]
    for change, message in cases:
        with pytest.raises(DocumentError) as refused:
            from_json(broken(document, change))
        assert str(refused.value).startswith(message)

    wrong_status = json.loads(to_json(document))
    wrong_status["reports"][0]["status"] = "done"
    with pytest.raises(DocumentError, match=r"document.reports\[0\].status: expected one of"):
        from_json(json.dumps(wrong_status))
    # An integer where a float is declared is a float to JSON: accepted.
    whole = json.loads(to_json(document))
    whole["reports"][0]["epsilon"] = 1
    assert from_json(json.dumps(whole))["reports"][0]["epsilon"] == 1


@pytest.mark.parametrize("setup", WINDOWS.values(), ids=WINDOWS.keys())
def test_the_page_and_the_table_render_the_model_read_back_from_json(
    redis_client: Any, setup: Callable[[Any], CampaignConfig]
) -> None:
    document = built(redis_client, setup)
    loaded = from_json(to_json(document))

    assert render_html(loaded) == render_html(document)
    assert format_window(loaded) == format_window(document)
    table, page = format_window(loaded), render_html(loaded)
    for report in loaded["reports"]:
        assert f"n = {report['n']:,}" in table
        for item in report["items"]:  # every item's estimate, in the table and on the page
            estimate = f"{item['estimate']:,.0f}"
            assert f'<td class="estimate">{estimate}</td>' in page
            assert estimate in table


def test_the_http_api_serves_the_document_the_worker_stored(
    redis_client: Any, redis_url: str
) -> None:
    config = plain(redis_client)
    Worker(redis_client).run_pass()  # aggregates and stores the window's report
    app = create_app({"redis_url": redis_url, "admin_token": ADMIN})

    with serve(app) as base_url:
        response = requests.get(
            f"{base_url}/v1/campaigns/{config.name}/reports/{WINDOW}",
            headers={"Authorization": f"Bearer {ADMIN}"},
            timeout=10,
        )

    assert response.status_code == 200
    stored = load_window(redis_client, config.name, WINDOW)
    assert stored is not None
    assert response.content == to_json(stored).encode()
    served = from_json(response.content)
    # The same numbers as a fresh build at the stored build time (a build is deterministic).
    built_at = parse_window(served["built_at"])
    assert served == build_window(redis_client, Registry(redis_client), config.name, WINDOW,
                                  built_at=built_at)  # fmt: skip
