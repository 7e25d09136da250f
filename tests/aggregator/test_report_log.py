"""Open-domain OLH in the aggregator: its window state is a report log, appended exactly once
inside the step's transaction, merged over shards; candidates are estimated by hashing every
logged report, with OLH's exact variance, and listed above the exact Binomial(n, 1/g)
release threshold at expected_false_discoveries / candidates."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom
from stream_entries import append, register

from ldptel.aggregator import shard as shard_module
from ldptel.aggregator.lease import Lease
from ldptel.aggregator.reports import Candidates, ReportOptions, build_window
from ldptel.aggregator.reports import statistics as report_module
from ldptel.aggregator.reports.open_domain import LOG_DISCOVERY_RULE, POST_PROCESSING
from ldptel.aggregator.reports.statistics import log_candidate_support, log_statistics
from ldptel.aggregator.shard import ShardStep
from ldptel.aggregator.state import StateKey, list_states, read_log
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.hashing import item_keys, lh_hash_scalar
from ldptel.client.oracles import ReportBatch
from ldptel.client.oracles.olh import OpenDomainOLH
from ldptel.store import keys
from ldptel.store.registry import Registry

WINDOW = 1_700_006_400


def olh_config(shards: int = 1, epsilon: float = 4.0) -> CampaignConfig:
    data = {"name": "answers", "oracle": "olh", "epsilon": epsilon, "max_length": 32}
    return CampaignConfig.from_dict({**data, "shards": shards}).as_created()


def olh(config: CampaignConfig) -> OpenDomainOLH:
    oracle = config.build_open()
    assert isinstance(oracle, OpenDomainOLH)
    return oracle


def post(
    client: Any, config: CampaignConfig, words: list[str], seed: int, size: int = 250
) -> list[list[ReportBatch]]:
    """The words' reports appended as the collector stores them, entries round-robin over
    the shards; per shard, its batches in stream order."""
    oracle = olh(config)
    rng = np.random.default_rng(seed)
    batches: list[list[ReportBatch]] = [[] for _ in range(config.shards)]
    for number, start in enumerate(range(0, len(words), size)):
        batch = oracle.perturb_keys(item_keys(words[start : start + size]), rng)
        append(client, config, batch, window=WINDOW, shard=number % config.shards)
        batches[number % config.shards].append(batch)
    return batches


def logged(oracle: OpenDomainOLH, batches: list[ReportBatch]) -> bytes:
    return b"".join(oracle.log_bytes(batch) for batch in batches)


def test_the_state_is_a_log_of_the_reports_appended_once_and_merged_over_shards(
    redis_client: Any,
) -> None:
    config = olh_config(shards=2)
    register(redis_client, config)
    oracle = olh(config)
    words = [f"w{i % 37}" for i in range(2300)]
    batches = post(redis_client, config, words, seed=1, size=100)  # 23 entries

    stats = Worker(redis_client, batch_entries=1).run_pass()  # one entry per step
    again = Worker(redis_client).run_pass()

    assert (stats.entries, stats.reports, again.reports) == (23, 2300, 0)
    assert oracle.g == 56 and oracle.log_record.itemsize == 6  # seed u32 + y u16
    state = StateKey(WINDOW, config.config_id)
    for shard in range(2):
        expected = logged(oracle, batches[shard])
        assert redis_client.get(state.log_key(config.name, shard)) == expected
        n = len(expected) // 6
        assert redis_client.hgetall(state.redis_key(config.name, shard)) == {b"n": str(n).encode()}
    assert list_states(redis_client, config.name, range(2)) == [state]
    log = read_log(redis_client, config.name, range(2), state, 6)
    assert log.n == 2300
    # Chunks of 7 records cross the shards' logs and lose or repeat none.
    assert b"".join(log.chunks(7)) == logged(oracle, batches[0]) + logged(oracle, batches[1])


def test_a_step_that_loses_a_race_appends_nothing(
    redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = olh_config()
    register(redis_client, config)
    oracle = olh(config)
    (batches,) = post(redis_client, config, ["a"] * 600, seed=2, size=200)
    lease = Lease(redis_client, keys.lease(config.name, 0), "w")
    assert lease.acquire()
    step = ShardStep(redis_client, Registry(redis_client), config.name, 0)
    group_log = shard_module.group_log

    def rival_step_first(*args: Any) -> Any:
        # Between this step's read and its EXEC another step logs the same entries and moves
        # the checkpoint: this step's EXEC must fail and append nothing.
        with monkeypatch.context() as inner:
            inner.setattr(shard_module, "group_log", group_log)
            rival = ShardStep(redis_client, Registry(redis_client), config.name, 0)
            assert rival.run(lease.token, 1000).reports == 600
        return group_log(*args)

    monkeypatch.setattr(shard_module, "group_log", rival_step_first)
    lost = step.run(lease.token, 1000)
    monkeypatch.setattr(shard_module, "group_log", group_log)

    assert lost.lost and lost.reports == 0
    state = StateKey(WINDOW, config.config_id)
    assert redis_client.get(state.log_key(config.name, 0)) == logged(oracle, batches)
    assert step.run(lease.token, 1000).reports == 0  # nothing left, nothing appended twice
    assert redis_client.strlen(state.log_key(config.name, 0)) == 600 * 6


def test_a_corrupt_entry_is_quarantined_and_the_others_logged(redis_client: Any) -> None:
    config = olh_config()
    register(redis_client, config)
    oracle = olh(config)
    (good,) = post(redis_client, config, ["a"] * 10, seed=3)
    bad = {"seed": np.array([1], dtype=np.uint32), "y": np.array([oracle.g], dtype=np.uint32)}
    append(redis_client, config, bad, window=WINDOW)  # y = g: no collector would store it

    stats = Worker(redis_client).run_pass()

    assert (stats.reports, stats.quarantined) == (10, 1)
    state = StateKey(WINDOW, config.config_id)
    assert redis_client.get(state.log_key(config.name, 0)) == logged(oracle, good)


def test_candidate_support_counts_every_logged_report_against_every_candidate(
    redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = olh_config(shards=3)
    register(redis_client, config)
    oracle = olh(config)
    post(redis_client, config, ["tea"] * 40 + ["mate"] * 20, seed=4, size=7)
    Worker(redis_client).run_pass()
    monkeypatch.setattr(report_module, "LOG_CHUNK_RECORDS", 5)  # many chunks, across shards
    log = read_log(redis_client, config.name, range(3), StateKey(WINDOW, config.config_id), 6)
    candidates = ["tea", "mate", "cocoa"]

    support = log_candidate_support(oracle, log, candidates)

    # The reference: xxh32 through the xxhash package, report by report.
    batch = oracle.log_batch(b"".join(log.chunks(1000)))
    reference = [
        sum(
            lh_hash_scalar(int(key), seed) % oracle.g == y
            for seed, y in zip(batch["seed"].tolist(), batch["y"].tolist(), strict=True)
        )
        for key in item_keys(candidates)
    ]
    assert support.tolist() == reference


def test_the_threshold_is_the_exact_binomial_quantile_and_the_variance_exact(
    redis_client: Any,
) -> None:
    # Heavy strings do not move a candidate nobody holds (no fixed family): the spread of
    # 2000 such estimates is OLH's variance at f = 0.
    config = olh_config(epsilon=2.0)
    register(redis_client, config)
    oracle = olh(config)
    words = ["a"] * 5000 + ["b"] * 3000 + [f"u{i}" for i in range(12000)]
    post(redis_client, config, words, seed=5, size=2000)
    Worker(redis_client).run_pass()
    log = read_log(redis_client, config.name, [0], StateKey(WINDOW, config.config_id), 6)
    candidates = ["a", "b", *(f"absent {i}" for i in range(2000))]
    n = len(words)

    support = log_candidate_support(oracle, log, candidates)
    stats, threshold = log_statistics(oracle, support, n, ReportOptions())

    null_variance = float(oracle.key_variance(n, np.zeros(1))[0])
    spread = float(np.mean(stats["estimate"][2:] ** 2))  # mean 0 under the null
    # 2000 independent null estimates: mean square / variance within 4 sqrt(2/2000) = 0.13
    # of 1 but with probability ~6e-5 (chi-square, normal approximation).
    assert spread / null_variance == pytest.approx(1.0, abs=0.13)
    # Stated: the exact variance at the clipped estimated f_v (plug-in); none is listed, so
    # each null candidate's f_v is at most threshold / n.
    at_threshold = float(oracle.key_variance(n, np.array([threshold / n]))[0])
    assert null_variance <= stats["variance"][2:].min()
    assert stats["variance"][2:].max() <= at_threshold
    for heavy, count in ((0, 5000), (1, 3000)):
        assert abs(stats["estimate"][heavy] - count) < 5 * stats["stderr"][heavy]
    # threshold = (k - n/g) / (p - 1/g), k the smallest count with P(count > k) <= 0.05 / C.
    tail, q = 0.05 / len(candidates), 1 / oracle.g
    k = threshold * (oracle.p - q) + n * q
    assert k == pytest.approx(round(k), abs=1e-6)
    assert binom.sf(round(k), n, q) <= tail < binom.sf(round(k) - 1, n, q)
    assert stats["significant"].tolist() == (support > round(k)).tolist()
    assert stats["significant"][:2].all() and not stats["significant"][2:].any()


def test_frequent_strings_are_found_and_strings_of_one_user_never_listed(
    redis_client: Any,
) -> None:
    config = olh_config(shards=2)
    register(redis_client, config)
    frequent = {"blue": 1200, "green": 800, "red": 500, "purple": 300, "black": 200}
    singles = [f"rare answer {i}" for i in range(1000)]
    words = [w for w, count in frequent.items() for _ in range(count)] + singles
    np.random.default_rng(3).shuffle(words)
    post(redis_client, config, words, seed=6)
    Worker(redis_client).run_pass()
    nobody = [f"never said {i}" for i in range(100)]
    candidates = Candidates((*frequent, *singles[:200], *nobody), "test list")

    (report,) = build_window(
        redis_client, Registry(redis_client), "answers", WINDOW, None, None, candidates
    )["reports"]

    assert report["oracle"] == "olh" and report["n"] == len(words)
    assert {item["item"] for item in report["items"]} == set(frequent)  # fixed seed
    discovery = report["discovery"]
    assert (discovery["candidates"], discovery["discovered"]) == (305, 5)
    assert discovery["statement"] == POST_PROCESSING
    assert report["significance"]["rule"] == LOG_DISCOVERY_RULE
    oracle = olh(config)
    null_stderr = math.sqrt(float(oracle.key_variance(len(words), np.zeros(1))[0]))
    assert report["significance"]["z"] == pytest.approx(discovery["threshold"] / null_stderr)
    for item in report["items"]:
        assert item["threshold"] == discovery["threshold"] < item["estimate"]
        assert abs(item["estimate"] - frequent[item["item"]]) < 5 * item["stderr"]


def test_the_open_domain_olh_vectors_hold() -> None:
    path = Path(__file__).parents[1] / "vectors/open_domain_olh.json"
    vectors = json.loads(path.read_text(encoding="utf-8"))
    config = CampaignConfig.from_dict(vectors["config"], stored=True)
    assert config.config_id == vectors["config_id"]
    oracle = olh(config)
    assert (oracle.g, oracle.p) == (vectors["g"], vectors["p"])
    reports = vectors["reports"]
    batch = oracle.decode([{"seed": r["seed"], "y": r["y"]} for r in reports])
    values = item_keys(r["value"] for r in reports)
    assert oracle.key_buckets(values, batch["seed"]).tolist() == [r["x"] for r in reports]

    records = oracle.log_bytes(batch)
    support = oracle.key_support(oracle.log_batch(records), item_keys(vectors["candidates"]))
    options = ReportOptions(false_flags=0.05)
    stats, threshold = log_statistics(oracle, support, len(reports), options)

    assert records.hex() == "".join(r["record"] for r in reports)
    assert support.tolist() == vectors["support"]
    assert stats["estimate"].tolist() == pytest.approx(vectors["estimate"], rel=1e-12)
    assert float(oracle.key_variance(len(reports), np.zeros(1))[0]) == pytest.approx(
        vectors["null_variance"], rel=1e-12
    )
    assert threshold == pytest.approx(vectors["threshold"], rel=1e-12)
    listed = [c for c, s in zip(vectors["candidates"], stats["significant"], strict=True) if s]
    assert listed == vectors["listed"]
