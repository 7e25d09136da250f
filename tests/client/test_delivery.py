"""Every spooled report reaches Redis exactly once: through 503s, 429s, lost answers,
captive-portal pages and a collector that is stopped and started again; the collector's own
4xx is final and its batch is kept as dead letters, counted and told to on_error. Answers
only a change of configuration can get past (a redirect to another origin or in a loop, a
refused token) keep the reports spooled and reach on_error; a refused token's reports wait
auth_wait for a fixed one. report() returns within its timeout while a config trickles in."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import pytest
from live_collector import (
    SLACK_SECONDS,
    LiveCollector,
    SilentServer,
    TrickleServer,
    canonical,
    sent_reports,
    stored_reports,
)
from reporter_settings import FAST
from waiting import wait_for

from ldptel.client import (
    RedirectNotFollowedError,
    ReportsRefusedError,
    ReportStatus,
    TokenRefusedError,
)
from ldptel.client.settings import AUTH_WAIT

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
    # The sender's first attempt may come after the flush gave up (a loaded machine).
    wait_for(lambda: "network" in (reporter.stats()["last_error"] or ""), "a network error")
    assert reporter.stats()["spooled"] == 12
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

    def switched() -> bool:
        if reporter._configs.active["colors"].config.config_id == new.config_id:
            return True
        reporter.report("colors", "red")
        reporter.flush(timeout=1)
        return False

    wait_for(switched, "the reporter switched to the new config", interval=0)
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


# -- answers only a change of configuration can get past: nothing is dead-lettered ---------
@pytest.mark.parametrize("redirect", ["another origin", "loop"])
def test_behind_a_307_reports_stay_spooled_and_go_once_the_collector_is_reachable(
    redirect, collector, redis_client, open_reporter
):
    config = collector.campaign(reports_per_window=1000)
    thief = SilentServer()
    try:
        collector.faults.location = {
            "another origin": f"{thief.url}/v1/reports",
            "loop": f"{collector.url}/v1/reports",
        }[redirect]
        collector.faults.always = "307"  # a proxy redirecting every POST
        errors: list[Exception] = []
        reporter = open_reporter(batch_size=10, on_error=errors.append)
        report_many(reporter, 25)
        assert reporter.report("colors", "red") is ReportStatus.SPOOLED  # the app sees nothing
        assert reporter.flush(timeout=1.0) is False
        wait_for(lambda: len(collector.faults.posted()) >= 3, "3 posts")  # retried, as for a 503
        stats = reporter.stats()
        assert stats["spooled"] == 26 and stats["dead_lettered"] == 0
        assert "HTTP 307" in (stats["last_error"] or "")
        (error,) = errors  # told once, not once per retry
        assert isinstance(error, RedirectNotFollowedError) and error.status == 307
        assert thief.heads == []
        collector.faults.always = ""  # reachable again
        assert reporter.flush(timeout=20)
    finally:
        thief.close()
    assert reporter.stats()["dead_lettered"] == 0 and reporter.stats()["delivered"] == 26
    assert_exactly_once(collector, redis_client, config, 26)


def test_a_refused_token_reaches_on_error_and_the_reports_wait_for_a_fixed_one(
    collector, redis_client, token, open_reporter, state_dir, caplog
):
    config = collector.campaign(reports_per_window=1000)
    wrong = "wrong-" + token  # the collector answers 403 "unknown ingest token"
    errors: list[Exception] = []
    from ldptel.client import Reporter

    with caplog.at_level(logging.DEBUG, logger="ldptel.client"):
        reporter = Reporter(
            collector.url, wrong, state_dir=state_dir, on_error=errors.append, **FAST
        )
        report_many(reporter, 5)
        started = time.time()
        assert reporter.flush(timeout=1.0) is False
        # The refusal may come after the flush gave up (a loaded machine): wait for it.
        refused = lambda: errors and reporter.stats()["awaiting_token"] == 5  # noqa: E731
        wait_for(refused, "the token refused and on_error told")
        stats = reporter.stats()
        reporter.close(timeout=0)
    (error,) = errors
    assert isinstance(error, TokenRefusedError) and error.field == "token" and error.status == 403
    assert "refused the ingest token" in error.reason and "unknown ingest token" in error.reason
    assert wrong not in str(error) and wrong not in caplog.text  # the token is never printed
    assert stats["dead_lettered"] == 0 and stats["awaiting_token"] == 5
    until = stats["awaiting_token_until"]
    assert until is not None and started <= until - AUTH_WAIT <= time.time()  # first refusal
    # A Reporter with the fixed token, on the same state: the reports go, once.
    fixed = open_reporter()
    assert fixed.flush(timeout=20)
    stats = fixed.stats()
    assert stats["delivered"] == 5 and stats["dead_lettered"] == 0
    assert stats["awaiting_token"] == 0 and stats["awaiting_token_until"] is None
    assert len(stored_reports(redis_client, config)) == 5


def test_reports_refused_for_the_token_beyond_auth_wait_are_dead_lettered(collector, open_reporter):
    collector.campaign(reports_per_window=1000)
    collector.faults.always = "401"  # a proxy that wants another token
    errors: list[Exception] = []
    reporter = open_reporter(auth_wait=0.3, on_error=errors.append)
    report_many(reporter, 5)
    assert reporter.flush(timeout=20)  # they left the spool: as dead letters
    stats = reporter.stats()
    assert stats["dead_lettered"] == 5 and stats["delivered"] == 0
    assert stats["awaiting_token"] == 0
    waiting, dead = errors
    assert isinstance(waiting, TokenRefusedError) and isinstance(dead, TokenRefusedError)
    assert "dead-lettered after waiting auth_wait = 0.3 s" in dead.reason
    posted = collector.faults.posted()  # they waited auth_wait (less two answers' latency)
    assert len(posted) >= 2 and posted[-1].at - posted[0].at >= 0.25


@pytest.mark.parametrize("fault", ["401", "307"])
def test_a_first_config_fetch_refused_or_redirected_says_why(fault, collector, open_reporter):
    collector.campaign()
    collector.faults.location = "https://elsewhere.example/v1/campaigns/colors"
    collector.faults.config_plan = [fault]
    errors: list[Exception] = []
    reporter = open_reporter(strict=False, on_error=errors.append)
    assert reporter.report("colors", "red") is ReportStatus.CAMPAIGN_UNAVAILABLE
    (error,) = errors
    kind = TokenRefusedError if fault == "401" else RedirectNotFollowedError
    assert isinstance(error, kind) and error.status == int(fault)


@pytest.mark.parametrize("head_at_once", [0, len(TrickleServer.ANSWER) - 4096])
def test_report_returns_within_its_timeout_while_the_config_trickles(
    head_at_once, token, state_dir
):
    from ldptel.client import CampaignUnavailableError, Reporter

    server = TrickleServer(head_at_once=head_at_once, interval=1.0)  # 1 byte/s
    errors: list[Exception] = []
    try:
        reporter = Reporter(
            server.url, token, state_dir=state_dir, timeout=2.0, on_error=errors.append
        )
        started = time.monotonic()
        status = reporter.report("colors", "red")  # never fetched: GETs its config
        took = time.monotonic() - started
        reporter.close(timeout=0)
    finally:
        server.close()
    assert status is ReportStatus.CAMPAIGN_UNAVAILABLE
    assert took < 2.0 + SLACK_SECONDS  # the timeout and a loaded machine's slack, not 4,000 s
    (error,) = errors
    assert isinstance(error, CampaignUnavailableError)
    assert "no complete answer within the 2 s timeout" in error.reason
