"""Every spooled report reaches Redis exactly once: through 503s, 429s, lost answers,
captive-portal pages and a collector that is stopped and started again; a 4xx is final and
its batch is kept as dead letters, counted."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import pytest
from live_collector import LiveCollector, canonical, sent_reports, stored_reports

from ldptel.client import ReportsRefusedError, ReportStatus

VALUES = ["red", "green", "blue", "cyan", "pink"]


def report_many(reporter: Any, n: int, campaign: str = "colors") -> None:
    for i in range(n):
        assert reporter.report(campaign, VALUES[i % len(VALUES)]) is ReportStatus.SPOOLED


def assert_exactly_once(collector: LiveCollector, redis: Any, config: Any, n: int) -> None:
    """Redis holds n reports, and they are those of the distinct batches posted."""
    stored = stored_reports(redis, config)
    assert len(stored) == n
    batches = sent_reports(collector.faults.posted())
    assert canonical(stored) == canonical(r for batch in batches.values() for r in batch)


def test_reports_arrive_once_in_batches(collector, redis_client, open_reporter):
    config = collector.campaign(reports_per_window=1000)
    reporter = open_reporter(batch_size=10)
    report_many(reporter, 35)
    assert reporter.flush(timeout=20)
    assert_exactly_once(collector, redis_client, config, 35)
    posted = collector.faults.posted()
    assert [len(sent_reports([p]).popitem()[1]) for p in posted] == [10, 10, 10, 5]
    assert all(p.headers["Content-Encoding"] == "gzip" for p in posted)
    assert reporter.stats()["delivered"] == 35 and reporter.stats()["spooled"] == 0


@pytest.mark.parametrize("fault", ["503", "429", "lose", "html"])
def test_retries_reuse_the_idempotency_key_and_store_once(
    fault, collector, redis_client, open_reporter
):
    config = collector.campaign(reports_per_window=1000)
    collector.faults.plan = [fault, fault, fault]
    reporter = open_reporter(batch_size=100)
    report_many(reporter, 12)
    assert reporter.flush(timeout=20)
    posted = collector.faults.posted()
    assert len(posted) == 4
    assert len({p.headers["Idempotency-Key"] for p in posted}) == 1
    assert len({p.body for p in posted}) == 1  # the same rows each time
    assert len(stored_reports(redis_client, config)) == 12


def test_collector_stopped_then_started_again(collector, redis_client, open_reporter):
    config = collector.campaign(reports_per_window=1000)
    reporter = open_reporter(batch_size=5)
    report_many(reporter, 3)
    collector.stop()
    report_many(reporter, 9)  # the app never notices
    assert reporter.flush(timeout=0.5) is False
    assert reporter.stats()["spooled"] == 12
    assert "network" in reporter.stats()["last_error"]
    collector.start()
    assert reporter.flush(timeout=20)
    assert_exactly_once(collector, redis_client, config, 12)


def test_retry_after_is_honoured(collector, redis_client, open_reporter):
    collector.campaign(reports_per_window=1000)
    collector.faults.retry_after = "1"  # far above the test backoff cap of 0.2 s
    collector.faults.plan = ["503"]
    reporter = open_reporter()
    report_many(reporter, 2)
    assert reporter.flush(timeout=20)
    first, second = (p.at for p in collector.faults.posted())
    assert second - first >= 0.95


def test_a_4xx_of_the_collector_is_final_and_kept_as_dead_letters(
    collector, redis_client, open_reporter, caplog
):
    config = collector.campaign(reports_per_window=1000)
    collector.faults.plan = ["400"]  # the collector's own refusal (its JSON error)
    errors: list[Exception] = []
    reporter = open_reporter(batch_size=4, on_error=errors.append)
    with caplog.at_level(logging.WARNING, logger="ldptel.client"):
        report_many(reporter, 4)
        assert reporter.flush(timeout=20)
        report_many(reporter, 4)
        assert reporter.flush(timeout=20)
    stats = reporter.stats()
    assert stats["dead_lettered"] == 4 and stats["delivered"] == 4
    assert any("refused 4 reports" in r.getMessage() for r in caplog.records)
    assert len(collector.faults.posted()) == 2  # no retry of the refused batch
    assert len(stored_reports(redis_client, config)) == 4
    (error,) = errors  # the app hears of it, from the sender's thread
    assert isinstance(error, ReportsRefusedError) and error.status == 400
    assert "refused reports of campaign 'colors' for good" in error.reason


def test_a_new_config_dead_letters_old_reports_and_switches(collector, redis_client, open_reporter):
    collector.campaign(reports_per_window=1000)
    reporter = open_reporter(batch_size=100, config_refresh=0.05)
    report_many(reporter, 3)
    new = collector.campaign(reports_per_window=1000, epsilon=2.0)  # the old id is retired
    assert reporter.flush(timeout=20)
    assert reporter.stats()["dead_lettered"] == 3
    deadline = time.monotonic() + 10
    while reporter._active["colors"].config.config_id != new.config_id:
        reporter.report("colors", "red")
        assert time.monotonic() < deadline
        reporter.flush(timeout=1)
    report_many(reporter, 5)
    assert reporter.flush(timeout=20)
    assert len(stored_reports(redis_client, new)) >= 5


def test_flush_waits_for_what_was_spooled_before_it_not_for_later_reports(
    collector, redis_client, open_reporter
):
    config = collector.campaign(reports_per_window=1000)
    collector.campaign("shapes", reports_per_window=100_000)
    collector.faults.unavailable = {"shapes"}  # reports of it stay spooled, retried forever
    reporter = open_reporter(batch_size=10)
    report_many(reporter, 12)
    stop = threading.Event()

    def keep_reporting() -> None:  # another thread of the app, reporting during the flush
        while not reporter._sender.flushing and not stop.is_set():
            time.sleep(0.001)
        while not stop.is_set():
            reporter.report("shapes", "red")
            time.sleep(0.005)

    other = threading.Thread(target=keep_reporting)
    other.start()
    try:
        assert reporter.flush(timeout=20)
    finally:
        stop.set()
        other.join()
    assert len(stored_reports(redis_client, config)) == 12
    assert reporter.stats()["spooled"] > 0  # the other thread's reports, still waiting


def test_a_reporter_closed_while_posting_leaves_its_batch_to_the_next_one(
    collector, redis_client, open_reporter, state_dir
):
    """close() gives up on a collector that does not answer; the next Reporter of the same
    process sends the batch at once (same key), not after the claim's CLAIM_SECONDS."""
    config = collector.campaign(reports_per_window=10)
    open_reporter().report("colors", "red")  # caches the config, delivers nothing yet
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        from ldptel.client import Reporter

        stuck = Reporter(f"http://127.0.0.1:{silent.getsockname()[1]}", "t", state_dir=state_dir)
        stuck.report("colors", "green")
        stuck.flush(timeout=0.3)  # the sender now waits on the silent server
        stuck.close(timeout=0.1)
    assert open_reporter().flush(timeout=20)
    assert len(stored_reports(redis_client, config)) == 2
