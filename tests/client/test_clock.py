"""The collector's clock as the client knows it: from answers' Date headers, carried on the
monotonic clock; a wrong device clock moves it only before the first answer, and never back
past the collector's latest time seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldptel.client import clock
from ldptel.client.clock import ServerClock, parse_date
from ldptel.client.statedb import open_state, transaction

COLLECTOR_NOW = 1_800_000_000.0


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The device clock: device[0] seconds since the epoch, set by the test."""
    now = [COLLECTOR_NOW]
    monkeypatch.setattr(clock, "device_time", lambda: now[0])
    return now


def test_an_answer_sets_the_clock_and_the_device_clock_no_longer_moves_it(
    tmp_path: Path, device: list[float]
) -> None:
    server = ServerClock()
    server.load(open_state(tmp_path, (clock.SCHEMA,)))
    assert not server.synced and server.now() == COLLECTOR_NOW  # the device's, before any answer
    server.observe(parse_date("Fri, 15 Jan 2027 08:00:00 GMT"))
    assert server.synced
    anchored = server.now()
    for jump in (86_400.0, -86_400.0, 30 * 86_400.0):
        device[0] = COLLECTOR_NOW + jump
        assert anchored <= server.now() < anchored + 60  # only real (monotonic) time passes


def test_before_an_answer_it_uses_the_last_offset_and_never_goes_back(
    tmp_path: Path, device: list[float]
) -> None:
    conn = open_state(tmp_path, (clock.SCHEMA,))
    first = ServerClock()
    first.load(conn)
    device[0] = COLLECTOR_NOW - 3600.0  # the device is an hour slow
    first.observe(COLLECTOR_NOW)
    with transaction(conn):
        first.save(conn)
    restarted = ServerClock()  # a new process, offline
    restarted.load(conn)
    assert restarted.now() == pytest.approx(COLLECTOR_NOW, abs=1.0)  # corrected by the offset
    device[0] -= 7 * 86_400.0  # set back a week: the floor holds
    assert restarted.now() >= COLLECTOR_NOW


def test_a_malformed_or_missing_date_is_none() -> None:
    assert parse_date(None) is None and parse_date("yesterday") is None
    assert parse_date("Thu, 01 Jan 1970 00:01:00 GMT") == 60.0


@pytest.mark.skipif(clock.boot_id() is None, reason="the platform gives no boot id")
def test_a_later_process_of_the_same_boot_keeps_the_collectors_clock(
    tmp_path: Path, device: list[float]
) -> None:
    conn = open_state(tmp_path, (clock.SCHEMA,))
    first = ServerClock()
    first.observe(COLLECTOR_NOW)
    with transaction(conn):
        first.save(conn)
    device[0] += 86_400.0  # the device clock jumps while no process runs
    later = ServerClock()
    later.load(conn)
    assert later.synced and COLLECTOR_NOW <= later.now() < COLLECTOR_NOW + 60
