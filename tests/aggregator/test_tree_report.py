"""Memoization "tree" through the real pipeline (stream -> worker -> window state -> report):
each window's count is the kernel's prefix-sum estimate of the same reports, its 95% interval
covers the tracked count at its stated rate, and the report states the tree's place, nodes
and the past-max_changes bias."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from stream_entries import append, make_config, register

from ldptel.aggregator.model import Report
from ldptel.aggregator.report import build_window
from ldptel.aggregator.worker import Worker
from ldptel.analysis.longitudinal import histories, tracked_frequencies, tree_batches
from ldptel.client.tree import TreeShape
from ldptel.store.registry import Registry

WINDOWS, INSTALLS, POPULATIONS = 16, 2000, 25


@pytest.fixture(scope="module")
def horizons(redis_url: str) -> list[tuple[list[Report], np.ndarray, np.ndarray]]:
    """Per population: the 16 window reports, the tracked counts of "yes", and the kernel's
    own estimates of the same reports."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    out = []
    try:
        for population in range(POPULATIONS):
            config = make_config(
                f"tree-{population}",
                domain=["no", "yes"],
                memoization="tree",
                horizon_windows=WINDOWS,
                max_changes=2,
                window_seconds=60,
                epsilon=2.0,
            )
            register(client, config)
            shape = TreeShape(WINDOWS, 2, 2.0)
            rng = np.random.default_rng(population)
            values = histories(np.array([0.6, 0.4]), INSTALLS, WINDOWS, 1, rng)
            sums, kernel = {}, []
            for t, batch in enumerate(tree_batches(values, shape, rng)):
                append(client, config, batch, window=t * 60)
                read = batch["bit"] != 2
                sums = shape.carry(t, sums, int((2 * batch["bit"][read] - 1).sum()))
                kernel.append(shape.estimate(sums, INSTALLS) * INSTALLS)
            Worker(client, build_reports=False).run_pass()
            registry = Registry(client)
            reports = [
                build_window(client, registry, config.name, t * 60)["reports"][0]
                for t in range(WINDOWS)
            ]
            truth = tracked_frequencies(values, 2, 2)[:, 1] * INSTALLS
            out.append((reports, truth, np.array(kernel)))
    finally:
        client.flushdb()
        client.close()
    return out


def test_each_window_is_the_kernels_prefix_sum_estimate(horizons: Any) -> None:
    for reports, _, kernel in horizons:
        found = np.array([r["items"][1]["estimate"] for r in reports])
        assert np.allclose(found, kernel, rtol=1e-12, atol=1e-6)
        no = np.array([r["items"][0]["estimate"] for r in reports])
        assert np.allclose(no + found, INSTALLS)  # binary: label 0 is n minus label 1


def test_the_intervals_cover_the_tracked_count_at_their_rate(horizons: Any) -> None:
    z = NormalDist().inv_cdf(0.975)
    trials = misses = 0
    for reports, truth, _ in horizons:
        for report, count in zip(reports, truth, strict=True):
            item = report["items"][1]
            trials += 1
            misses += abs(item["estimate"] - count) > z * item["stderr"]
    # 400 intervals: ~20 misses expected; 4 sd of Binomial(400, 0.05) is 17.4.
    assert 3 <= misses <= 37, misses


def test_the_report_states_the_tree_and_its_guarantee(horizons: Any) -> None:
    reports = horizons[0][0]
    section = reports[5]["tree"]
    assert (section["window_index"], section["horizon_windows"], section["levels"]) == (5, 16, 5)
    assert [(n["level"], n["start"]) for n in section["nodes"]] == [(2, 0), (1, 4)]
    assert "not reported" in section["past_max_changes"]
    longitudinal = reports[5]["privacy"]["longitudinal"]
    assert longitudinal["memoization"] == "tree"
    assert longitudinal["holds_for"].startswith("any two value histories")
    assert reports[5]["oracle"] == "tree" and reports[5]["n"] == INSTALLS


def test_the_report_renders_in_words_text_and_html(horizons: Any) -> None:
    from ldptel.aggregator.html import render_html
    from ldptel.aggregator.report import privacy_sentences
    from ldptel.aggregator.table import format_window

    report = horizons[0][0][7]
    sentences = privacy_sentences(report)
    assert sentences[0].startswith("Every install's reports of a horizon of 16 windows")
    assert not any("shuffling" in line for line in sentences)  # not claimed for a tree
    document = {"campaign": report["campaign"], "window": report["window"], "built_at": "x"}
    document["reports"] = [report]
    assert "yes" in format_window(document)  # type: ignore[arg-type]
    assert "yes" in render_html(document)  # type: ignore[arg-type]


def test_the_document_round_trips_through_the_model(horizons: Any) -> None:
    from ldptel.aggregator.model import from_json, to_json

    report = horizons[0][0][3]
    document = {"campaign": report["campaign"], "window": report["window"], "built_at": "x"}
    document["reports"] = [report]
    assert from_json(to_json(document)) == document  # type: ignore[arg-type]


def test_prune_keeps_a_tree_state_until_its_horizon_is_over() -> None:
    from ldptel.aggregator.tree import horizon_end

    config = make_config(
        "h", domain=["no", "yes"], memoization="tree", horizon_windows=16, window_seconds=60
    )
    assert horizon_end(config, 0) == horizon_end(config, 15 * 60) == 16 * 60
    assert horizon_end(config, 16 * 60) == 32 * 60
    assert horizon_end(make_config("p", window_seconds=60), 120) == 180


def test_a_categorical_window_is_the_kernels_estimate_per_sampled_label(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        labels = ["a", "b", "c"]
        config = make_config(
            "tree-cat", domain=labels, memoization="tree", horizon_windows=8,
            max_changes=2, window_seconds=60, epsilon=2.0,
        )  # fmt: skip
        register(client, config)
        shape = TreeShape(8, 2, 2.0, items=3)
        rng = np.random.default_rng(11)
        values = histories(np.full(3, 1 / 3), INSTALLS, 8, 1, rng)
        sums: list[dict[int, int]] = [{}, {}, {}]
        kernel = []
        for t, batch in enumerate(tree_batches(values, shape, rng)):
            append(client, config, batch, window=t * 60)
            read = batch["bit"] != 2
            for item in range(3):
                mine = read & (batch["item"] == item)
                sums[item] = shape.carry(t, sums[item], int((2 * batch["bit"][mine] - 1).sum()))
            kernel.append([shape.estimate(s, INSTALLS) * INSTALLS for s in sums])
        Worker(client, build_reports=False).run_pass()
        registry = Registry(client)
        for t in range(8):
            report = build_window(client, registry, config.name, t * 60)["reports"][0]
            found = [item["estimate"] for item in report["items"]]
            assert np.allclose(found, kernel[t], atol=1e-6)
            assert [len(node["sums"]) for node in report["tree"]["nodes"]] == [3] * len(
                shape.decomposition(t)
            )
    finally:
        client.flushdb()
        client.close()
