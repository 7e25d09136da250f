"""Privacy levels through the SDK: a report is made at the user's level, randomized with that
level's oracle, charged that level's epsilon under that level's budget, memoized per level,
and sent in batches of one level that the collector stores with their level and the
aggregator combines; a bad level is refused at the call site, a level that does not report
(threshold) is skipped, and a state_dir from before levels is migrated."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
from live_collector import canonical, sent_reports

from ldptel.aggregator.report import load_window
from ldptel.aggregator.worker import Worker
from ldptel.client import ReportStatus, ledger, memo
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import BudgetExhaustedError, InvalidLevelError, LdptelError
from ldptel.client.statedb import open_state, transaction
from ldptel.store import keys

LEVELS = {"high": 0.5, "medium": 1.0, "low": 2.0}
LABELS = [f"item-{i}" for i in range(64)]
#: OLH derives g = round(e^eps + 1) per level: 3 at high, 4 at medium (and at t = 1), 8 at low.
G = {"high": 3, "medium": 4, "low": 8}


def leveled(collector: Any, **changes: Any) -> CampaignConfig:
    """An OLH campaign with the three levels, generous ledger limits unless changed."""
    settings = {
        "oracle": "olh",
        "epsilon": 2.0,
        "domain": LABELS,
        "levels": LEVELS,
        "reports_per_window": 1000,
        "lifetime_epsilon": 1000.0,
        **changes,
    }
    return collector.campaign("leveled", **settings)


def posted_bodies(collector: Any) -> list[dict[str, Any]]:
    return [json.loads(seen.body) for seen in collector.faults.posted()]


def stored_by_level(redis: Any, config: CampaignConfig) -> dict[str, list[dict[str, Any]]]:
    """The stream's reports per `l` field, each entry decoded with its level's oracle."""
    found: dict[str, list[dict[str, Any]]] = {}
    for _, entry in redis.xrange(keys.stream(config.name, 0)):
        level = entry[b"l"].decode()
        oracle = config.level_oracle(level)
        assert oracle is not None
        reports = oracle.encode(oracle.unpack(entry[b"p"], int(entry[b"n"])))
        found.setdefault(level, []).extend(reports)
    return found


def test_reports_at_two_levels_reach_redis_with_their_level_and_are_combined(
    collector, redis_client, open_reporter
):
    config = leveled(collector)
    reporter = open_reporter(level="high")
    for label in LABELS[:60]:  # one device, its level changing per call (level= overrides)
        assert reporter.report("leveled", label) is ReportStatus.SPOOLED
        assert reporter.report("leveled", label, level="low") is ReportStatus.SPOOLED
    assert reporter.flush(timeout=20)

    bodies = posted_bodies(collector)
    assert sorted((b["level"], len(b["reports"])) for b in bodies) == [("high", 60), ("low", 60)]
    stored = stored_by_level(redis_client, config)
    assert sorted(stored) == ["high", "low"]
    for body in bodies:  # exactly what was sent, decoded with the level's oracle
        assert canonical(stored[body["level"]]) == canonical(body["reports"])
    # Each level's oracle was used: y < g always; at low (g = 8) some y >= 3, which high's
    # oracle (g = 3) never draws (all 60 below 3 has probability (3/8)^60).
    assert all(r["y"] < G["high"] for r in stored["high"])
    assert all(r["y"] < G["low"] for r in stored["low"])
    assert any(r["y"] >= G["high"] for r in stored["low"])
    spent = reporter.privacy_spent("leveled")
    assert spent.window_reports == 120
    assert spent.lifetime_epsilon == pytest.approx(60 * 0.5 + 60 * 2.0)

    Worker(redis_client).run_pass()
    [(_, entry)] = redis_client.xrange(keys.stream("leveled", 0), count=1)
    document = load_window(redis_client, "leveled", int(entry[b"w"]))
    assert document is not None
    combined, *per_level = document["reports"]
    assert combined["level"] == "" and combined["n"] == 120 and combined["status"] == "ok"
    rows = combined["combined"]["levels"]
    assert [(r["level"], r["epsilon"], r["n"]) for r in rows] == [
        ("high", 0.5, 60), ("medium", 1.0, 0), ("low", 2.0, 60),
    ]  # fmt: skip
    assert [r["epsilon_used"] for r in rows] == pytest.approx([0.5, 1.0, 2.0])
    assert sum(r["weight"] for r in rows) == pytest.approx(1.0)
    assert rows[2]["weight"] > rows[0]["weight"] > 0  # low's reports carry more information
    assert len(combined["items"]) == len(LABELS)
    assert [(r["level"], r["n"]) for r in per_level] == [("high", 60), ("low", 60)]


def test_a_bad_level_is_refused_at_the_call_site(collector, open_reporter):
    leveled(collector)
    collector.campaign("plain", reports_per_window=10)
    reporter = open_reporter()
    cases = [
        ({}, "requires a privacy level"),
        ({"level": "extreme"}, "'extreme' is not a privacy level"),
        ({"level": "High"}, "must be a privacy level name"),
        ({"level": 2}, "must be a privacy level name"),
    ]
    for kwargs, reason in cases:
        with pytest.raises(InvalidLevelError, match=reason) as refused:
            reporter.report("leveled", "item-1", **kwargs)
        assert refused.value.field == "level" and isinstance(refused.value, LdptelError)
    with pytest.raises(InvalidLevelError, match="declares no privacy levels"):
        reporter.report("plain", "red", level="low")
    with pytest.raises(InvalidLevelError, match="privacy level name"):
        open_reporter(level="Not a level!")
    with pytest.raises(InvalidLevelError):
        reporter.level = ""
    assert reporter.stats()["spooled"] == 0  # nothing of the refused calls was kept

    reporter.level = "medium"  # the user picks a level: it applies to campaigns with levels
    assert reporter.report("leveled", "item-1") and reporter.report("plain", "red")
    assert reporter.flush(timeout=20)
    levels = {b["campaign"]: b.get("level") for b in posted_bodies(collector)}
    assert levels == {"leveled": "medium", "plain": None}  # no level field without levels


def test_under_threshold_a_level_below_t_skips_without_perturbing(
    collector, redis_client, open_reporter, state_dir, caplog
):
    config = leveled(collector, level_strategy="threshold", level_threshold=1.0)
    reporter = open_reporter(level="high")
    with caplog.at_level(logging.INFO, logger="ldptel.client"):
        assert reporter.report("leveled", "item-1") is ReportStatus.LEVEL_NOT_COLLECTED
        assert reporter.report("leveled", "item-2") is ReportStatus.LEVEL_NOT_COLLECTED
    skips = [r for r in caplog.records if "collects no reports" in r.getMessage()]
    assert len(skips) == 1 and "item-" not in caplog.text
    assert reporter.stats()["spooled"] == 0
    assert reporter.privacy_spent("leveled").window_reports == 0
    conn = open_state(state_dir, ())
    assert conn.execute("SELECT count(*) FROM memo").fetchone() == (0,)  # nothing drawn
    conn.close()

    assert reporter.report("leveled", "item-1", level="low") is ReportStatus.SPOOLED
    assert reporter.flush(timeout=20)
    stored = stored_by_level(redis_client, config)
    assert list(stored) == ["low"] and stored["low"][0]["y"] < G["medium"]  # g at t = 1
    assert reporter.privacy_spent("leveled").lifetime_epsilon == pytest.approx(1.0)


def test_memo_is_per_level_and_a_new_level_is_charged(collector, open_reporter, state_dir):
    leveled(collector, memoization="exact_discloses_changes")
    reporter = open_reporter(level="medium")
    reporter.report("leveled", "item-5")
    reporter.report("leveled", "item-5")
    reporter.report("leveled", "item-5", level="high")  # a fresh randomization at 0.5
    reporter.report("leveled", "item-5")  # back at medium: the medium memo, free
    assert reporter.flush(timeout=20)
    batches = {b["level"]: b["reports"] for b in posted_bodies(collector)}
    assert len(batches["medium"]) == 3 and len(set(map(json.dumps, batches["medium"]))) == 1
    assert batches["high"][0] != batches["medium"][0]
    assert reporter.privacy_spent("leveled").lifetime_epsilon == pytest.approx(1.0 + 0.5)
    reporter.close()
    again = open_reporter(level="high")  # the memo survives a restart, per level
    again.report("leveled", "item-5")
    assert again.flush(timeout=20)
    assert sent_reports(collector.faults.posted()[-1:]).popitem()[1] == batches["high"]
    assert again.privacy_spent("leveled").lifetime_epsilon == pytest.approx(1.5)


def test_memo_keys_separate_levels_and_keep_their_old_form_without_levels(tmp_path):
    config = CampaignConfig.from_dict(
        {"name": "c", "oracle": "de", "epsilon": 2.0, "domain": LABELS, "levels": LEVELS}
    )
    plain = CampaignConfig.from_dict(
        {"name": "c", "oracle": "de", "epsilon": 2.0, "domain": LABELS}
    )
    conn = open_state(tmp_path, (memo.SCHEMA,))
    secret = b"k" * 32
    keys_at = {level: memo.Randomizer(config, conn, secret, level).key(3) for level in LEVELS}
    assert len(set(keys_at.values())) == 3
    old_form = f"{plain.config_id}:3".encode()  # what state_dirs from before levels hold
    expected = hashlib.blake2b(old_form, key=secret, digest_size=16).digest()
    assert memo.Randomizer(plain, conn, secret).key(3) == expected


def test_the_ledger_charges_the_levels_epsilon_against_the_levels_budget(collector, open_reporter):
    # No lifetime_epsilon: 10 x 2.0 = 20 for the campaign, scaled to 10 x 0.5 = 5 at high.
    leveled(collector, lifetime_epsilon=None, levels={"high": 0.5, "low": 2.0})
    reporter = open_reporter(level="high")
    for label in LABELS[:10]:
        assert reporter.report("leveled", label)
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("leveled", LABELS[10])
    assert refused.value.field == "lifetime_epsilon" and "5" in refused.value.reason
    assert reporter.privacy_spent("leveled").lifetime_epsilon == pytest.approx(5.0)
    reporter.level = "low"  # the totals are per campaign; the budget is the level's (20)
    assert reporter.report("leveled", LABELS[10])
    assert reporter.privacy_spent("leveled").lifetime_epsilon == pytest.approx(7.0)


def test_a_refused_batch_keeps_its_level_in_the_dead_letters(collector, open_reporter, state_dir):
    leveled(collector)
    collector.faults.plan = ["400"]  # the collector's own refusal: final
    reporter = open_reporter(level="low")
    reporter.report("leveled", "item-1")
    assert reporter.flush(timeout=20)
    conn = open_state(state_dir, ())
    assert conn.execute("SELECT campaign, level FROM dead_letters").fetchall() == [
        ("leveled", "low")
    ]
    conn.close()


#: The spool's tables as released before privacy levels (no level column).
SPOOL_BEFORE_LEVELS = """
CREATE TABLE spool (
  id INTEGER PRIMARY KEY, campaign TEXT NOT NULL, config_id TEXT NOT NULL,
  window_start INTEGER NOT NULL, created REAL NOT NULL, report TEXT NOT NULL, batch INTEGER
);
CREATE INDEX spool_batch ON spool (batch) WHERE batch IS NOT NULL;
CREATE TABLE batches (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL, campaign TEXT NOT NULL, config_id TEXT NOT NULL,
  attempts INTEGER NOT NULL, next_at REAL NOT NULL, owner INTEGER NOT NULL
);
CREATE TABLE dead_letters (
  id INTEGER PRIMARY KEY, campaign TEXT NOT NULL, config_id TEXT NOT NULL, report TEXT NOT NULL,
  status INTEGER, reason TEXT NOT NULL, at REAL NOT NULL
)
"""


def test_a_state_dir_from_before_levels_is_migrated_and_delivered(
    collector, redis_client, open_reporter, state_dir
):
    plain = collector.campaign(
        "plain", reports_per_window=10, memoization="exact_discloses_changes"
    )
    leveled(collector)
    old = open_state(state_dir, (SPOOL_BEFORE_LEVELS, memo.SCHEMA, ledger.SCHEMA))
    secret = b"s" * 32
    with transaction(old):
        old.execute("INSERT INTO secrets VALUES ('memo', ?)", (secret,))
        red = hashlib.blake2b(f"{plain.config_id}:0".encode(), key=secret, digest_size=16)
        old.execute("INSERT INTO memo VALUES (?, '{\"y\":3}', 1.0)", (red.digest(),))
        old.execute("INSERT INTO batches VALUES (1, 'k1', 'plain', ?, 1, 0, 1)", (plain.config_id,))
        rows = [("plain", plain.config_id, 0, 0.0, '{"y":1}', 1)]  # a batch sent, no answer
        rows.append(("plain", plain.config_id, 0, 0.0, '{"y":2}', None))
        old.executemany("INSERT INTO spool VALUES (NULL, ?, ?, ?, ?, ?, ?)", rows)
        old.execute(
            "INSERT INTO dead_letters VALUES (NULL, 'plain', ?, '{\"y\":4}', 409, 'old', 0)",
            (plain.config_id,),
        )
    old.close()

    reporter = open_reporter()  # its sender starts at once on the old spool
    stats = reporter.stats()
    assert stats["spooled"] + stats["delivered"] == 2
    assert reporter.report("plain", "red")  # the old memo (old key form) is resent, free
    assert reporter.report("leveled", "item-1", level="high")
    assert reporter.flush(timeout=20)
    posted = collector.faults.posted()
    bodies = posted_bodies(collector)
    # The old batch first, under its key; how the sender groups the rest depends on timing.
    assert posted[0].headers["Idempotency-Key"] == "k1" and bodies[0]["reports"] == [{"y": 1}]
    assert [r["y"] for b in bodies if "level" not in b for r in b["reports"]] == [1, 2, 3]
    assert [(b["level"], len(b["reports"])) for b in bodies if "level" in b] == [("high", 1)]
    assert reporter.privacy_spent("plain").lifetime_epsilon == 0.0
    conn = open_state(state_dir, ())
    for table in ("spool", "batches", "dead_letters"):
        assert "level" in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    assert conn.execute("SELECT level FROM dead_letters").fetchall() == [("",)]
    conn.close()
    open_reporter().close()  # migrating again is a no-op
