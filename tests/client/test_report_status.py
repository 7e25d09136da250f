"""report() never raises into the app by default: a spent budget, an offline first use, a
full disk, a read-only state_dir, a bad value, a closed Reporter each come back as a
ReportStatus (truthy only when spooled), counted in stats() and passed to on_error; strict=True
raises them. Disk errors are LdptelErrors, and after a full disk the spool is still delivered.
A disabled Reporter touches neither disk nor network."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_collector import stored_reports
from waiting import wait_for

from ldptel.client import (
    BudgetExhaustedError,
    CampaignUnavailableError,
    DiskFullError,
    InvalidValueError,
    LdptelError,
    Reporter,
    ReporterClosedError,
    ReportStatus,
    StateError,
    StateReadOnlyError,
    pipeline,
)
from ldptel.client.sender import RESERVE_BYTES, RESERVE_FILENAME

VALUES = ["red", "green", "blue"]


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A real tmpfs mounted at `path` (root only: skips elsewhere, see the max_page_count
    variant of the disk-full test, which runs everywhere)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_every_failure_is_a_status_counted_and_passed_to_on_error(collector, open_reporter):
    collector.campaign(reports_per_window=1)
    errors: list[LdptelError] = []
    reporter = open_reporter(strict=False, on_error=errors.append)
    assert reporter.report("colors", "red") is ReportStatus.SPOOLED
    calls = [
        (("colors", "green"), ReportStatus.BUDGET_EXHAUSTED, BudgetExhaustedError),
        (("colors", "purple"), ReportStatus.INVALID_VALUE, InvalidValueError),
        (("colors", 3), ReportStatus.INVALID_VALUE, InvalidValueError),
        (("nope", "red"), ReportStatus.UNKNOWN_CAMPAIGN, LdptelError),
        (("Not A Name!", "red"), ReportStatus.UNKNOWN_CAMPAIGN, LdptelError),
        (("colors", "red", "low"), ReportStatus.INVALID_LEVEL, LdptelError),
    ]
    for (campaign, value, *level), status, kind in calls:
        result = reporter.report(campaign, value, level=level[0] if level else None)
        assert result is status and not result
        assert isinstance(errors[-1], kind)
    reporter.close()
    assert reporter.report("colors", "red") is ReportStatus.CLOSED
    assert isinstance(errors[-1], ReporterClosedError)
    assert len(errors) == len(calls) + 1
    assert reporter.stats()["not_spooled"] == {
        "budget_exhausted": 1,
        "invalid_value": 2,
        "unknown_campaign": 2,
        "invalid_level": 1,
        "closed": 1,
    }


def test_strict_mode_raises_what_the_default_mode_returns(collector, open_reporter):
    collector.campaign(reports_per_window=1)
    reporter = open_reporter(strict=True)
    assert reporter.report("colors", "red")
    with pytest.raises(BudgetExhaustedError):
        reporter.report("colors", "green")
    assert reporter.stats()["not_spooled"] == {"budget_exhausted": 1}


def test_offline_on_first_use_is_a_status_without_waiting(collector, open_reporter):
    collector.campaign()
    collector.stop()
    errors: list[LdptelError] = []
    reporter = open_reporter(strict=False, on_error=errors.append, backoff_base=60.0)
    assert reporter.report("colors", "red") is ReportStatus.CAMPAIGN_UNAVAILABLE
    assert reporter.report("colors", "red") is ReportStatus.CAMPAIGN_UNAVAILABLE
    assert all(isinstance(e, CampaignUnavailableError) for e in errors) and len(errors) == 2
    assert "asking again in" in errors[1].reason  # the second call sent no request


def test_an_on_error_that_raises_does_not_reach_the_app(collector, open_reporter, caplog):
    collector.campaign(reports_per_window=1)

    def broken(error: LdptelError) -> None:
        raise RuntimeError("the app's callback is broken")

    reporter = open_reporter(strict=False, on_error=broken)
    reporter.report("colors", "red")
    assert reporter.report("colors", "red") is ReportStatus.BUDGET_EXHAUSTED
    assert "on_error callback raised" in caplog.text


def test_a_bug_inside_report_is_an_internal_error_status(
    collector, open_reporter, caplog, monkeypatch
):
    collector.campaign(reports_per_window=10)
    errors: list[LdptelError] = []
    reporter = open_reporter(strict=False, on_error=errors.append)
    reporter.report("colors", "red")  # the config is active

    def broken(*args: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(pipeline, "value_of", broken)
    assert reporter.report("colors", "red") is ReportStatus.INTERNAL_ERROR
    assert isinstance(errors[0].__cause__, KeyError)
    assert "KeyError" in caplog.text


def test_a_disabled_reporter_stores_and_sends_nothing(collector, token, tmp_path):
    collector.campaign()
    state_dir = tmp_path / "never-created"
    before = len(collector.faults.seen)
    reporter = Reporter(collector.url, token, state_dir=state_dir, enabled=False)
    assert reporter.report("colors", "red") is ReportStatus.DISABLED
    assert reporter.flush(timeout=1)
    assert reporter.privacy_spent("colors").lifetime_epsilon == 0.0
    assert reporter.stats()["not_spooled"] == {"disabled": 1}
    reporter.close()
    assert not state_dir.exists()
    assert collector.faults.seen[before:] == []


def test_a_read_only_state_dir_is_a_status_not_an_exception(collector, token, tmp_path):
    collector.campaign()
    errors: list[LdptelError] = []
    with read_only_dir(tmp_path / "ro") as directory:
        reporter = Reporter(
            collector.url, token, state_dir=directory / "state", on_error=errors.append
        )
        assert reporter.report("colors", "red") is ReportStatus.STATE_ERROR
        assert isinstance(errors[0], StateReadOnlyError) and errors[0].field == "state_dir"
        assert isinstance(errors[0].__cause__, OSError)
        assert reporter.stats()["spooled"] == 0  # stats() works without a state
        assert reporter.stats()["not_spooled"] == {"state_error": 2}  # opening, then report
        reporter.close()
        with pytest.raises(StateReadOnlyError):
            Reporter(collector.url, token, state_dir=directory / "state", strict=True)


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """A directory nobody may write in: a read-only tmpfs for root (which ignores modes),
    mode 0o500 for anyone else."""
    if os.geteuid() == 0:
        with tmpfs(path, "ro,size=64k") as mounted:
            yield mounted
        return
    path.mkdir()
    path.chmod(0o500)
    try:
        yield path
    finally:
        path.chmod(0o700)


@pytest.mark.parametrize("disk", ["tmpfs", "max_page_count"])
def test_after_a_full_disk_the_spool_is_delivered_and_reporting_resumes(
    disk, collector, redis_client, open_reporter, tmp_path
):
    """tmpfs: a real 1 MiB file system that the WAL fills (root only). max_page_count:
    SQLite's own limit on the database's pages, the same SQLITE_FULL without root."""
    config = collector.campaign(reports_per_window=100_000)  # memoized values: no budget
    errors: list[LdptelError] = []
    with contextlib.ExitStack() as stack:
        if disk == "tmpfs":
            state_dir = stack.enter_context(tmpfs(tmp_path / "small", "size=1m")) / "state"
        else:
            state_dir = tmp_path / "state"
        reporter = open_reporter(
            strict=False, state_dir=state_dir, batch_size=5000, on_error=errors.append
        )
        assert (state_dir / RESERVE_FILENAME).stat().st_size == RESERVE_BYTES
        if disk == "max_page_count":
            assert reporter.report("colors", "red")
            (pages,) = reporter._state.conn.execute("PRAGMA page_count").fetchone()
            reporter._state.conn.execute(f"PRAGMA max_page_count = {pages + 8}")
        spooled = 0
        for i in range(100_000):
            status = reporter.report("colors", VALUES[i % 3])
            if status is not ReportStatus.SPOOLED:
                break
            spooled += 1
        assert status is ReportStatus.DISK_FULL
        assert isinstance(errors[0], DiskFullError) and isinstance(errors[0], StateError)
        assert errors[0].__cause__ is not None and "full" in str(errors[0].__cause__)
        spooled += disk == "max_page_count"
        assert spooled > 10
        # Nothing was due (batch_size 5000, max_batch_age an hour): the full disk sends it.
        assert reporter.flush(timeout=30)
        assert len(stored_reports(redis_client, config)) == spooled  # none lost, none twice
        assert reporter.stats()["delivered"] == spooled
        spooled_again = lambda: reporter.report("colors", "red") is ReportStatus.SPOOLED  # noqa: E731
        wait_for(spooled_again, "reporting resumed", interval=0.05)
        assert (state_dir / RESERVE_FILENAME).stat().st_size == RESERVE_BYTES
        assert reporter.flush(timeout=30)
        assert len(stored_reports(redis_client, config)) == spooled + 1
        reporter.close(timeout=0)
