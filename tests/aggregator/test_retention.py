"""Window state retention (`ldptel aggregator prune`): the state of an old window whose report
is stored and up to date is deleted, its report stays, and nothing can rebuild that report
from a partial state afterwards; every other state is kept, saying why."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from stream_entries import make_config, register, simulate

from ldptel.aggregator import shard as shard_module
from ldptel.aggregator.retention import prune
from ldptel.aggregator.state import StateKey
from ldptel.aggregator.worker import Worker
from ldptel.cli.main import main
from ldptel.store import keys
from ldptel.store.registry import Registry

DAY = 86_400
OLD, NEXT = 1_700_006_400, 1_700_006_400 + DAY
#: Two windows after NEXT started: OLD ended a window ago, NEXT did not.
NOW = NEXT + DAY + DAY / 2


@pytest.fixture
def config(redis_client: Any) -> Any:
    """A campaign with two reported windows, OLD and NEXT, of 400 reports each."""
    config = make_config()
    register(redis_client, config)
    values = np.random.default_rng(0).choice(8, size=400)
    simulate(redis_client, config, values, window=OLD, seed=1)
    simulate(redis_client, config, values, window=NEXT, seed=2)
    Worker(redis_client).run_pass()
    return config


def outcomes(client: Any, **options: Any) -> dict[int, str]:
    found = prune(
        client, Registry(client), "screens", **{"before": NEXT + 1, "now": NOW, **options}
    )
    return {outcome.state.window: outcome.reason for outcome in found}


def test_an_old_reported_window_is_deleted_and_its_report_stays(
    redis_client: Any, config: Any
) -> None:
    report = redis_client.get(keys.report("screens", OLD))

    assert outcomes(redis_client) == {
        OLD: "deleted",
        NEXT: "its window ended less than a window ago",
    }
    old = StateKey(OLD, config.config_id)
    assert not redis_client.exists(old.redis_key("screens", 0))
    assert redis_client.zrangebyscore(keys.state_index("screens", 0), OLD, OLD) == []
    assert redis_client.sismember(keys.pruned_states("screens", 0), old.member)
    assert redis_client.get(keys.report("screens", OLD)) == report
    assert redis_client.exists(StateKey(NEXT, config.config_id).redis_key("screens", 0))


def test_a_dry_run_deletes_nothing(redis_client: Any, config: Any) -> None:
    before = sorted(redis_client.keys("*"))
    assert outcomes(redis_client, dry_run=True)[OLD] == "would be deleted (dry run)"
    assert sorted(redis_client.keys("*")) == before


def test_a_window_with_reports_not_yet_counted_or_reported_is_kept(
    redis_client: Any, config: Any
) -> None:
    values = np.zeros(50, dtype=np.int64)
    simulate(redis_client, config, values, window=OLD, seed=3)  # a batch in flight, not counted
    assert outcomes(redis_client)[OLD] == "entries of its window are not aggregated yet"

    Worker(redis_client, report_options=None).run_pass()  # counted (and reported)
    redis_client.hset(keys.pending_reports("screens", 0), f"{config.config_id}:{OLD}:", 99)
    assert outcomes(redis_client)[OLD] == "its report is out of date (reports pending)"

    redis_client.hdel(keys.pending_reports("screens", 0), f"{config.config_id}:{OLD}:")
    redis_client.delete(keys.report("screens", OLD))
    assert outcomes(redis_client)[OLD] == "no report of its window is stored"


def test_a_late_batch_of_a_pruned_window_is_quarantined_not_counted(
    redis_client: Any, config: Any
) -> None:
    report = redis_client.get(keys.report("screens", OLD))
    assert outcomes(redis_client)[OLD] == "deleted"
    # A collector whose clock is days behind stamps a batch with the pruned window.
    simulate(redis_client, config, np.zeros(30, dtype=np.int64), window=OLD, seed=4)

    stats = Worker(redis_client).run_pass()

    assert (stats.reports, stats.quarantined) == (0, 1)
    reason = redis_client.xrange(keys.quarantine("screens", 0))[0][1][b"reason"]
    assert b"pruned" in reason
    assert not redis_client.exists(StateKey(OLD, config.config_id).redis_key("screens", 0))
    assert redis_client.get(keys.report("screens", OLD)) == report  # not rebuilt from 30


def test_a_prune_committing_during_a_step_makes_the_step_apply_nothing(
    redis_client: Any, config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulate(redis_client, config, np.zeros(30, dtype=np.int64), window=OLD, seed=5)
    member = f"{config.config_id}:{OLD}:"
    drop = shard_module.ShardStep._drop_pruned

    def prune_meanwhile(self: Any, *args: Any) -> None:
        drop(self, *args)  # read before the prune: not pruned yet
        redis_client.sadd(keys.pruned_states("screens", 0), member)  # the prune's EXEC

    monkeypatch.setattr(shard_module.ShardStep, "_drop_pruned", prune_meanwhile)
    lost = Worker(redis_client).run_pass()
    monkeypatch.setattr(shard_module.ShardStep, "_drop_pruned", drop)
    done = Worker(redis_client).run_pass()

    assert (lost.reports, lost.quarantined) == (0, 0)
    assert (done.reports, done.quarantined) == (0, 1)


def test_the_command_prints_one_json_document_even_with_nothing_to_prune(
    redis_client: Any, redis_url: str, config: Any, capsys: Any
) -> None:
    command = ["aggregator", "prune", "screens", "--before", "2023-11-16", "--redis-url", redis_url]
    assert main([*command, "--json"]) == 0
    state = {
        "shard": 0, "window": "2023-11-15T00:00:00Z", "window_unix": OLD,
        "config_id": config.config_id, "level": "", "deleted": True, "reason": "deleted",
    }  # fmt: skip
    head = {"campaign": "screens", "before": "2023-11-16T00:00:00Z", "dry_run": False}
    assert json.loads(capsys.readouterr().out) == {**head, "deleted": 1, "states": [state]}
    assert main([*command, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {**head, "deleted": 0, "states": []}
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "deleted 0 of 0 window states before 2023-11-16T00:00:00Z"
    )
    assert main(["aggregator", "prune", "nope", "--before", "1", "--redis-url", redis_url]) == 2


def test_a_pruned_window_is_reported_as_stored(
    redis_client: Any, redis_url: str, config: Any, capsys: Any, tmp_path: Any
) -> None:
    stored = json.loads(redis_client.get(keys.report("screens", OLD)))
    assert outcomes(redis_client)[OLD] == "deleted"
    report = ["report", "screens", "--window", str(OLD), "--redis-url", redis_url]

    assert main([*report, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == stored
    names = tmp_path / "names.txt"
    names.write_text("item1\n", encoding="utf-8")
    assert main([*report, "--candidates", str(names)]) == 2
    assert "candidates" in capsys.readouterr().err
