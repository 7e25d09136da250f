"""Open-domain campaigns in the aggregator: a sketch's window state is packed and counted
exactly once; a report estimates candidate strings and lists only those clearing the
release threshold, which it states."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from stream_entries import append, register

from ldptel.aggregator import shard as shard_module
from ldptel.aggregator.html import render_html
from ldptel.aggregator.reports import Candidates, ReportOptions, build_window, significance_z
from ldptel.aggregator.reports.open_domain import POST_PROCESSING
from ldptel.aggregator.reports.statistics import open_domain_statistics
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.table import format_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery.threshold import largest_count_bound
from ldptel.client.hashing import item_keys
from ldptel.client.oracles.sketch import KeySketch
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400


def open_config(**params: Any) -> CampaignConfig:
    data = {"name": "answers", "oracle": "cms", "epsilon": 4.0, "max_length": 32}
    return CampaignConfig.from_dict({**data, "params": params}).as_created()


def sketch(config: CampaignConfig) -> KeySketch:
    oracle = config.build_open()
    assert isinstance(oracle, KeySketch)
    return oracle


def post(client: Any, config: CampaignConfig, words: list[str], seed: int, size: int = 250) -> Any:
    """The words' reports appended in batches as the collector stores them; their support."""
    oracle = sketch(config)
    rng = np.random.default_rng(seed)
    total = np.zeros(oracle.support_size, dtype=np.int64)
    for start in range(0, len(words), size):
        batch = oracle.perturb_keys(item_keys(words[start : start + size]), rng)
        append(client, config, batch, window=WINDOW)
        total += oracle.support(batch)
    return total


def test_a_sketch_state_is_packed_and_counted_exactly_once(redis_client: Any) -> None:
    config = open_config(k=256, m=256)  # 65,536 cells: packed
    register(redis_client, config)
    words = [f"w{i % 37}" for i in range(2300)]
    # 30 entries of 10 reports (sparse deltas: BITFIELD), then 4 of 500 (dense: rewritten).
    expected = post(redis_client, config, words[:300], seed=1, size=10)
    expected += post(redis_client, config, words[300:], seed=2, size=500)

    stats = Worker(redis_client, batch_entries=1).run_pass()  # one entry per step
    again = Worker(redis_client).run_pass()

    assert (stats.entries, stats.reports, again.reports) == (34, 2300, 0)
    state = StateKey(WINDOW, config.config_id)
    assert redis_client.hgetall(state.redis_key(config.name, 0)) == {b"n": b"2300"}
    assert redis_client.strlen(state.cells_key(config.name, 0)) == 8 * 65536
    n, support = read_state(redis_client, config.name, [0], state, 65536)
    assert n == 2300
    assert support.tolist() == expected.tolist()


def test_a_step_whose_packed_state_changed_after_it_was_read_applies_nothing(
    redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = open_config(k=256, m=256)
    register(redis_client, config)
    post(redis_client, config, ["a"] * 1000, seed=2, size=1000)  # dense: read, then rewritten
    state = StateKey(WINDOW, config.config_id)
    cells = state.cells_key(config.name, 0)
    read = shard_module.read_packed

    def read_then_race(*args: Any) -> Any:
        packed = read(*args)
        redis_client.set(cells, b"\0" * 8)  # another writer, between the read and EXEC
        return packed

    monkeypatch.setattr(shard_module, "read_packed", read_then_race)
    lost = Worker(redis_client).run_pass()
    monkeypatch.setattr(shard_module, "read_packed", read)
    redis_client.delete(cells)
    done = Worker(redis_client).run_pass()

    assert (lost.reports, done.reports) == (0, 1000)
    assert read_state(redis_client, config.name, [0], state, 65536)[0] == 1000


def test_frequent_strings_are_found_and_strings_of_one_user_never_listed(
    redis_client: Any,
) -> None:
    config = open_config(k=256, m=512)
    register(redis_client, config)
    frequent = {"blue": 1200, "green": 800, "red": 500, "purple": 300, "black": 200}
    singles = [f"rare answer {i}" for i in range(1000)]
    words = [w for w, count in frequent.items() for _ in range(count)] + singles
    np.random.default_rng(3).shuffle(words)
    post(redis_client, config, words, seed=4)
    Worker(redis_client).run_pass()
    nobody = [f"never said {i}" for i in range(100)]
    candidates = Candidates((*frequent, *singles[:200], *nobody), "test list")

    (report,) = build_window(
        redis_client, Registry(redis_client), "answers", WINDOW, None, None, candidates
    )["reports"]

    listed = {item["item"] for item in report["items"]}
    assert listed == set(frequent)  # at fixed seed; each single is listed w.p. < 0.05/305
    discovery = report["discovery"]
    assert (discovery["candidates"], discovery["discovered"]) == (305, 5)
    assert discovery["expected_false_discoveries"] == 0.05
    assert discovery["statement"] == POST_PROCESSING
    oracle = sketch(config)
    z = NormalDist().inv_cdf(1 - 0.05 / 305)
    noise = float(oracle.key_variance(len(words), np.zeros(1))[0])
    # significance.z states the threshold in stderrs of the reports' noise.
    assert report["significance"]["z"] == pytest.approx(discovery["threshold"] / math.sqrt(noise))
    # The stated threshold: the expected shortfall of a candidate nobody holds, at least
    # that of the reports' noise alone (sigma phi(z) / tail, the normal's), and at k = 256
    # rows little above it: the hash family's collisions add little.
    alone = math.sqrt(noise) * NormalDist().pdf(z) / (0.05 / 305)
    assert alone < discovery["threshold"] < 1.1 * alone
    assert all(item["estimate"] > item["threshold"] for item in report["items"])


def test_the_null_stderr_matches_the_spread_of_candidates_nobody_holds(redis_client: Any) -> None:
    # Heavy values make the fixed family's collision term a third of the variance: without
    # it the spread would be ~1.5x the stated variance.
    config = open_config(k=64, m=256)
    register(redis_client, config)
    words = ["a"] * 5000 + ["b"] * 3000 + [f"u{i}" for i in range(12000)]
    support = post(redis_client, config, words, seed=5, size=2000)
    nobody = [f"absent {i}" for i in range(2000)]
    candidates = ["a", "b", *nobody]

    stats, threshold = open_domain_statistics(
        sketch(config), support, len(words), candidates, ReportOptions()
    )

    oracle = sketch(config)
    null_variance = float(oracle.key_variance(len(words), np.zeros(1))[0])
    null_variance += float(oracle.family_variance(np.array([5000, 3000, 0]))[-1])
    spread = float(np.mean(stats["estimate"][2:] ** 2))  # mean 0 under the null
    # 2000 near-independent null estimates: their mean square / variance is within
    # 4 sqrt(2/2000) = 0.13 of 1 but with probability ~6e-5 (chi-square, normal approx.).
    assert spread / null_variance == pytest.approx(1.0, abs=0.13)
    # The stated stderr of a null candidate (plug-in family term) is at least that.
    assert float(np.min(stats["variance"][2:])) >= 0.99 * null_variance
    assert not stats["significant"][2:].any()
    assert (stats["threshold"] == threshold).all()


def test_the_release_vectors_hold() -> None:
    path = Path(__file__).parents[1] / "vectors/open_domain.json"
    vectors = json.loads(path.read_text(encoding="utf-8"))
    case = vectors["release"]
    config = CampaignConfig.from_dict(vectors["config"], stored=True)
    oracle = sketch(config)
    support = oracle.support(oracle.decode(case["reports"]))
    n = len(case["reports"])

    stats, threshold = open_domain_statistics(
        oracle, support, n, case["candidates"], ReportOptions()
    )

    assert stats["estimate"].tolist() == pytest.approx(case["estimate"], rel=1e-12)
    z = significance_z(len(case["candidates"]), 0.05)
    assert z == pytest.approx(case["z"])
    top = float(stats["estimate"].max())
    assert largest_count_bound(oracle, n, top, z) == pytest.approx(case["count_bound"], rel=1e-12)
    # The vector's threshold is exact; ours rounds the collision offsets up onto a grid of
    # cells of sigma / 64 here: at most 2 cells above, never below.
    sigma = math.sqrt(float(oracle.key_variance(n, np.zeros(1))[0]))
    assert case["threshold"] <= threshold <= case["threshold"] + 2 * sigma / 64
    assert float(np.sqrt(stats["variance"][-1])) >= case["null_stderr_with_family"]


@pytest.mark.slow
def test_chromium_shows_the_discovered_candidates_and_the_release_threshold(
    redis_client: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    config = open_config(k=64, m=256)
    register(redis_client, config)
    post(redis_client, config, ["tea"] * 900 + ["coffee"] * 600 + ["<b>mate</b>"], seed=6)
    Worker(redis_client).run_pass()
    candidates = Candidates(("tea", "coffee", "<b>mate</b>", "cocoa"), "test list")
    document = build_window(
        redis_client, Registry(redis_client), "answers", WINDOW, None, None, candidates
    )
    page_file = tmp_path / "open.html"
    page_file.write_text(render_html(document), encoding="utf-8")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            rows = page.locator("table.items tbody tr")
            shown = {rows.nth(i).get_attribute("data-item") for i in range(rows.count())}
            assert shown == {"tea", "coffee"}
            assert page.locator("svg.chart rect.bar").count() == 2
            text = page.locator("p.discovery").inner_text()
            assert "2 of 4 candidates (test list) discovered" in text
            assert "release threshold" in text and "costs no privacy" in page.inner_text("body")
            assert "2 of 4 candidates" in page.locator(".summary").inner_text()
        finally:
            browser.close()


def test_candidates_no_client_can_send_are_dropped_and_said_so(redis_client: Any) -> None:
    config = open_config(k=64, m=256)  # max_length 32 bytes
    register(redis_client, config)
    post(redis_client, config, ["tea"] * 300 + ["coffee"] * 200, seed=5)
    Worker(redis_client).run_pass()
    sendable = ("tea", "coffee", "cocoa")
    too_long = "x" * 33, "é" * 17  # 33 and 34 UTF-8 bytes

    def report_for(values: tuple[str, ...]) -> Any:
        document = build_window(
            redis_client, Registry(redis_client), "answers", WINDOW, None, None,
            Candidates(values, "test list"),
        )  # fmt: skip
        return document, document["reports"][0]

    document, report = report_for((*sendable, *too_long))
    _, reference = report_for(sendable)
    assert report["discovery"]["too_long"] == 2
    assert report["discovery"]["candidates"] == 3
    assert report["discovery"]["threshold"] == reference["discovery"]["threshold"]
    assert report["items"] == reference["items"]
    text = " ".join(format_window(document).split())  # the table wraps its sentences
    assert "2 given candidates longer than max_length 32 bytes were dropped" in text
    assert "too_long" not in reference["discovery"]
