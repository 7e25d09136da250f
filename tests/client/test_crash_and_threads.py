"""The spool survives a SIGKILL of the reporting process (and what is sent, a power loss), a
forked child reports through its own sender, and concurrent report() calls from many threads
are each stored exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

from live_collector import stored_reports
from test_delivery import VALUES


def test_spool_survives_sigkill(collector, token, state_dir, redis_client, open_reporter):
    config = collector.campaign(reports_per_window=1000)
    child = textwrap.dedent(
        f"""
        import os, signal, sys
        from ldptel.client import Reporter
        reporter = Reporter({collector.url!r}, {token!r}, state_dir={str(state_dir)!r},
                            max_batch_age=3600, batch_size=1000)
        for i in range(25):
            reporter.report("colors", {VALUES!r}[i % 5])
        print("reported", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert run.stdout.strip() == "reported"
    assert stored_reports(redis_client, config) == []  # nothing was sent before the kill
    reporter = open_reporter()  # same state_dir
    assert reporter.stats()["spooled"] == 25
    assert reporter.flush(timeout=20)
    assert len(stored_reports(redis_client, config)) == 25
    assert reporter.privacy_spent("colors").window_reports == 25  # the ledger survived too


def test_the_wal_is_synced_before_each_batch_is_posted(collector, open_reporter, monkeypatch):
    """A commit survives a killed process at once, a power loss only once the WAL is synced:
    what the collector may store must be on disk first, with its ledger charge, memo and
    idempotency key, or a rebooted client could spend that epsilon again or resend the batch
    under a new key."""
    from ldptel.client import statedb

    collector.campaign(reports_per_window=10)
    reporter = open_reporter(batch_size=2)
    events = []
    real_sync, real_post = statedb.sync_wal, reporter._transport.post_batch

    def sync(state_dir):
        events.append(("sync", reporter.stats()["pending_batches"]))
        real_sync(state_dir)

    def post(*args, **kwargs):
        events.append(("post", None))
        return real_post(*args, **kwargs)

    monkeypatch.setattr(statedb, "sync_wal", sync)
    monkeypatch.setattr(reporter._transport, "post_batch", post)
    for value in VALUES[:4]:
        assert reporter.report("colors", value)
    assert reporter.flush(timeout=20)
    # Each POST follows a sync made after its batch (and key) was committed.
    assert [name for name, _ in events] == ["sync", "post", "sync", "post"]
    assert all(pending >= 1 for name, pending in events if name == "sync")


def test_concurrent_reports_are_each_stored_once(collector, redis_client, open_reporter):
    threads, per_thread = 8, 60
    config = collector.campaign(reports_per_window=threads * per_thread)
    reporter = open_reporter(batch_size=50, max_batch_age=0.05)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(per_thread):
                reporter.report("colors", VALUES[(offset + i) % 5])
        except BaseException as error:  # surfaced below
            errors.append(error)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []
    assert reporter.flush(timeout=30)
    assert len(stored_reports(redis_client, config)) == threads * per_thread
    assert reporter.privacy_spent("colors").window_reports == threads * per_thread
    # Every report is a fresh randomization, charged once: no charge lost between threads.
    spent = reporter.privacy_spent("colors").lifetime_epsilon
    assert abs(spent - threads * per_thread * config.epsilon) < 1e-9


def test_a_forked_child_reports_through_its_own_sender(collector, redis_client, open_reporter):
    config = collector.campaign(reports_per_window=1000)
    reporter = open_reporter(batch_size=5)
    for value in VALUES:
        reporter.report("colors", value)
    pid = os.fork()
    if pid == 0:  # the child: report, deliver, exit without running pytest's teardown
        code = 1
        try:
            for value in VALUES * 2:
                reporter.report("colors", value)
            code = 0 if reporter.flush(timeout=20) else 2
            reporter.close(timeout=0)
        finally:
            os._exit(code)
    for value in VALUES:
        reporter.report("colors", value)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert reporter.flush(timeout=20)
    assert len(stored_reports(redis_client, config)) == 20
    # Parent and child share one ledger: all 20 reports are charged, none twice.
    assert abs(reporter.privacy_spent("colors").lifetime_epsilon - 20 * config.epsilon) < 1e-9
