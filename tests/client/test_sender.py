"""The sender's rarer branches, each against a real collector: a 413 halves the batch; a
Retry-After given as an HTTP date is waited for; a claim (lease) held by a live sender keeps
others away until it expires, then another sender takes the batch under the same key and the
first one's late answer changes nothing; a claim left by a process SIGKILLed mid-flush is
taken at once; a post to a collector that trickles its answer ends at its total deadline."""

from __future__ import annotations

import email.utils
import logging
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from live_collector import SLACK_SECONDS, SilentServer, TrickleServer, sent_reports, stored_reports
from waiting import wait_for

from ldptel.client import Reporter, spool

VALUES = ["red", "green", "blue", "cyan", "pink"]


def test_a_batch_too_large_for_the_collector_is_halved(collector, redis_client, open_reporter):
    config = collector.campaign(reports_per_window=100)
    collector.faults.plan = ["413"]
    reporter = open_reporter(batch_size=8)
    for i in range(8):
        reporter.report("colors", VALUES[i % 5])
    assert reporter.flush(timeout=20)
    posted = sent_reports(collector.faults.posted())  # key -> reports, in posting order
    assert [len(reports) for reports in posted.values()] == [8, 4, 4]
    assert len(stored_reports(redis_client, config)) == 8
    assert reporter.stats()["dead_lettered"] == 0


def test_retry_after_as_an_http_date_is_waited_for(collector, open_reporter):
    collector.campaign(reports_per_window=10)
    # Whole seconds: the wait is between 1 and 2 s, far above the test backoff cap of 0.2 s.
    collector.faults.retry_after = email.utils.formatdate(time.time() + 2, usegmt=True)
    collector.faults.plan = ["503"]
    reporter = open_reporter()
    reporter.report("colors", "red")
    assert reporter.flush(timeout=20)
    first, second = (p.at for p in collector.faults.posted())
    assert second - first >= 0.95


def cache_the_config(collector, open_reporter) -> None:
    """A Reporter on the live collector fetches and caches the config (state_dir/configs)
    and delivers its one report, so that Reporters on a silent server can report offline."""
    first = open_reporter()
    first.report("colors", "red")
    assert first.flush(timeout=20)
    first.close()


def test_a_claim_is_a_lease_kept_while_held_and_taken_over_once_expired(
    collector, redis_client, open_reporter, state_dir, monkeypatch, caplog
):
    config = collector.campaign(reports_per_window=10)
    cache_the_config(collector, open_reporter)
    monkeypatch.setattr(spool, "CLAIM_SECONDS", 4.0)
    # From the start: A's late answer is logged whenever its timeout ends, even before B's
    # flush below returns on a slow machine.
    caplog.set_level(logging.INFO, logger="ldptel.client")
    silent = SilentServer()
    try:
        # A's request waits (timeout 8 s) on a collector that never answers; its lease on
        # the batch ends after 4 s.
        a = Reporter(
            silent.url, "t", state_dir=state_dir, timeout=8.0, max_batch_age=0.01, strict=True
        )
        a.report("colors", "green")
        key = silent.wait_for_request()["idempotency-key"]
        b = open_reporter()  # same state_dir, the live collector
        assert b.flush(timeout=0.3) is False  # the lease holds: B leaves the batch to A
        assert b.stats()["pending_batches"] == 1
        assert b.flush(timeout=20)  # the lease expired: B sent it, under A's key
        assert list(sent_reports(collector.faults.posted()[-1:])) == [key]
        # A's request timed out: its late answer
        wait_for(lambda: a._sender.last_error is not None, "A's request timed out")
        assert "another sender has it now" in caplog.text
        a.close(timeout=0)
    finally:
        silent.close()
    assert len(silent.heads) == 1  # A did not retry what B delivered
    assert len(stored_reports(redis_client, config)) == 2
    assert b.stats()["delivered"] == 2 and b.stats()["pending_batches"] == 0


def test_a_claim_left_by_a_killed_process_is_taken_at_once(
    collector, redis_client, open_reporter, state_dir
):
    config = collector.campaign(reports_per_window=10)
    cache_the_config(collector, open_reporter)
    silent = SilentServer()
    child = textwrap.dedent(
        f"""
        from ldptel.client import Reporter
        reporter = Reporter({silent.url!r}, "t", state_dir={str(state_dir)!r}, timeout=60)
        for value in {VALUES[1:]!r}:
            reporter.report("colors", value)
        reporter.flush(timeout=60)  # posting to a collector that never answers
        """
    )
    process = subprocess.Popen([sys.executable, "-c", child])
    try:
        key = silent.wait_for_request()["idempotency-key"]  # mid-flush: the batch is claimed
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
        silent.close()
    reporter = open_reporter()
    assert reporter.stats()["pending_batches"] == 1
    # Well before the claim's CLAIM_SECONDS (120 s): its owner is gone.
    assert spool.CLAIM_SECONDS > 20
    assert reporter.flush(timeout=20)
    assert list(sent_reports(collector.faults.posted()[-1:])) == [key]
    assert len(stored_reports(redis_client, config)) == 5


@pytest.mark.parametrize("verdict", ["retry", "reject", "too_large"])
def test_a_lost_lease_leaves_the_batch_as_the_new_holder_left_it(verdict, tmp_path):
    """The spool's answers other than "delivered" change a batch only while its claim holds."""
    from ldptel.client.statedb import open_state, transaction

    conn = open_state(tmp_path, (spool.SCHEMA,))
    with transaction(conn):
        spool.append(conn, "c", "0123456789abcdef", 0, 0.0, '{"y":1}')
    mine = spool.claim(conn, 0.0, 10, 60.0, True)
    assert mine is not None
    theirs = spool.claim(conn, mine.lease + 1, 10, 60.0, True)  # after the lease ended
    assert theirs is not None and theirs.key == mine.key and theirs.lease != mine.lease
    answer = {
        "retry": lambda b: spool.retry_later(conn, b, 1e12),
        "reject": lambda b: spool.dead_letter(conn, b, 400, "bad", 0.0),
        "too_large": lambda b: spool.dissolve(conn, b),
    }[verdict]
    assert answer(mine) is False
    assert conn.execute("SELECT next_at FROM batches").fetchall() == [(theirs.lease,)]
    assert answer(theirs) is True


def test_a_post_has_a_total_deadline(collector, open_reporter, state_dir):
    collector.campaign(reports_per_window=10)
    cache_the_config(collector, open_reporter)
    server = TrickleServer(interval=0.5)  # a read timeout of 1 s (per read) never trips
    try:
        reporter = Reporter(
            server.url, "t", state_dir=state_dir, timeout=1.0, max_batch_age=0.01, strict=True
        )
        reporter.report("colors", "green")
        wait_for(lambda: server.closed, "the sender gave up on the answer and closed")
        assert server.closed[0] < 1.0 + SLACK_SECONDS  # the timeout, and a loaded machine's slack
        wait_for(lambda: reporter.stats()["last_error"] is not None, "the sender's error")
        assert "no complete answer within the 1 s timeout" in reporter.stats()["last_error"]
        assert reporter.stats()["spooled"] == 1  # kept, to retry
        reporter.close(timeout=0)
    finally:
        server.close()
