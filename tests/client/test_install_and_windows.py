"""One install, one ledger: whatever the collector URL's spelling, whatever the device clock.

The default state_dir is per app install (the platform's user data directory, keyed by the
ingest token); state dirs of older SDKs (keyed by the URL) are moved or folded in. Windows are
the collector's: however the device clock jumps, no window as the collector files it gets more
than the campaign's reports_per_window from one install.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import platformdirs
import pytest
from collector_api import campaign_config
from reporter_settings import FAST
from served_collector import served

from ldptel.client import Reporter, clock, install, ledger
from ldptel.client.errors import BudgetExhaustedError
from ldptel.client.guarantee import Budget
from ldptel.client.statedb import open_state, transaction
from ldptel.store import codec, keys

DAY = 86_400.0


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The platform's user data directory, here (platformdirs reads XDG_DATA_HOME on Linux)."""
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def spellings(url: str) -> list[str]:
    port = url.rsplit(":", 1)[1]
    return [url, f"http://localhost:{port}", f"{url}/"]


def test_the_default_state_is_one_per_install_whatever_the_url_spelling(
    collector: Any, token: str, data_home: Path, redis_client: Any
) -> None:
    collector.campaign(reports_per_window=1)
    opened = [Reporter(url, token, **FAST) for url in spellings(collector.url)]
    try:
        assert len({r.state_dir for r in opened}) == 1
        state_dir = opened[0].state_dir
        assert state_dir.is_relative_to(platformdirs.user_data_path("ldptel", appauthor=False))
        assert opened[0].report("colors", "red")
        for other in opened[1:]:  # the same ledger: this window's one report is spent
            with pytest.raises(BudgetExhaustedError) as refused:
                other.report("colors", "red")
            assert refused.value.field == "window_reports"
        assert opened[0].flush(timeout=20)
    finally:
        for reporter in opened:
            reporter.close(timeout=0)
    assert sum(windows_of_stored_reports(redis_client).values()) == 1


def windows_of_stored_reports(redis_client: Any, name: str = "colors") -> Counter[int]:
    """Reports stored per window, as the collector filed them (and the aggregator counts)."""
    entries = [codec.decode(fields) for _, fields in redis_client.xrange(keys.stream(name, 0))]
    counts: Counter[int] = Counter()
    for entry in entries:
        counts[entry.window] += entry.n
    return counts


def test_an_older_url_keyed_state_dir_is_moved_into_the_install(
    collector: Any, token: str, data_home: Path
) -> None:
    collector.campaign(reports_per_window=10, lifetime_epsilon=2.0)
    legacy = install.legacy_state_dir(collector.url)
    old = open_state(legacy, install.SCHEMAS)
    with transaction(old):  # the old SDK spent 2 epsilon of this campaign
        ledger.charge(old, "colors", 0, 60, 2.0, Budget(10, 10.0, 10.0))
    old.close()
    with Reporter(collector.url, token, **FAST) as moved:
        assert moved.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)
        with pytest.raises(BudgetExhaustedError):
            moved.report("colors", "red")
    assert not legacy.exists()


def test_a_second_url_keyed_state_dir_is_folded_in_not_forked(
    collector: Any, token: str, data_home: Path
) -> None:
    collector.campaign(reports_per_window=10, lifetime_epsilon=3.5)
    first, second = spellings(collector.url)[:2]
    with Reporter(first, token, **FAST) as reporter:
        assert reporter.report("colors", "red")  # 1 epsilon in the install's state
        assert reporter.flush(timeout=20)
    legacy = install.legacy_state_dir(second)
    old = open_state(legacy, install.SCHEMAS)
    with transaction(old):  # an old SDK under the other spelling spent 2 more
        ledger.charge(old, "colors", 0, 60, 2.0, Budget(10, 10.0, 10.0))
    old.close()
    with Reporter(second, token, **FAST) as folded:
        assert folded.privacy_spent("colors").lifetime_epsilon == pytest.approx(3.0)
        with pytest.raises(BudgetExhaustedError) as refused:
            folded.report("colors", "red")  # 3 + 1 > 3.5
        assert refused.value.field == "lifetime_epsilon"
    assert not legacy.exists() and legacy.with_name(legacy.name + ".migrated").exists()
    with Reporter(second, token, **FAST) as again:  # folded once, not twice
        assert again.privacy_spent("colors").lifetime_epsilon == pytest.approx(3.0)


class DeviceClock:
    """The device's wall clock, off from the real time by `offset` seconds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        real = clock.device_time
        monkeypatch.setattr(clock, "device_time", lambda: real() + self.offset)


@pytest.mark.parametrize("jumps", [[DAY, -DAY, 3 * DAY], [-DAY, DAY, -7 * DAY, 30 * DAY]])
def test_no_device_clock_puts_more_than_the_window_budget_in_a_collector_window(
    collector: Any,
    open_reporter: Any,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    jumps: list[float],
) -> None:
    collector.campaign(reports_per_window=1, window_seconds=60)
    device = DeviceClock(monkeypatch)
    made = 0
    for jump in [0.0, *jumps]:
        device.offset = jump
        for _ in range(2):  # a running Reporter (the clock it learned), then a restarted one
            reporter = open_reporter(strict=False)
            made += bool(reporter.report("colors", "red"))
            made += bool(reporter.report("colors", "green"))
            reporter.flush(timeout=2)
            reporter.close(timeout=0)
    final = open_reporter()
    final.flush(timeout=2)
    per_window = windows_of_stored_reports(redis_client)
    assert per_window and max(per_window.values()) == 1  # as the collector files them
    assert sum(per_window.values()) + final.stats()["spooled"] == made  # held, not lost


#: The issue's sequence: the phone's clock set by weeks and a year, forward and back.
WEEKS_AND_YEARS = [0.0, 30 * DAY, 0.0, 30 * DAY, -7 * DAY, 365 * DAY, 0.0]


def test_moving_the_whole_process_clock_never_overfills_a_collector_window(
    redis_url: str, redis_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The collector runs in its own process on the real clock; this process's wall clock
    # (time.time itself, as setting a phone's clock moves every reader of it) jumps.
    real = time.time
    offset = [0.0]
    with served(redis_url, tmp_path, workers=1) as collector:
        api = collector.api()
        api.create_campaign(campaign_config(reports_per_window=1, lifetime_epsilon=1e6))
        token = api.create_token()
        monkeypatch.setattr(time, "time", lambda: real() + offset[0])
        made = 0
        for jump in WEEKS_AND_YEARS:
            offset[0] = jump
            with Reporter(
                collector.url, token, state_dir=tmp_path / "state", **{**FAST, "strict": False}
            ) as app:
                made += bool(app.report("colors", "red"))
                made += bool(app.report("colors", "green"))
                app.flush(timeout=5)
        with Reporter(collector.url, token, state_dir=tmp_path / "state", **FAST) as last:
            last.flush(timeout=5)
            spooled = last.stats()["spooled"]
    per_window = windows_of_stored_reports(redis_client)
    assert per_window and max(per_window.values()) == 1  # as the collector files them
    assert sum(per_window.values()) + spooled == made  # held for a later window, not lost


def test_reports_of_a_campaign_retired_meanwhile_are_dead_lettered_not_held(
    collector: Any, open_reporter: Any
) -> None:
    collector.campaign(reports_per_window=10)
    reporter = open_reporter()
    assert reporter.report("colors", "red")
    retired = collector.api.session.post(
        f"{collector.url}/v1/campaigns/colors/retire", headers=collector.api.admin()
    )
    assert retired.status_code in (200, 204), retired.text
    reporter._configs.adopt("colors", reporter._configs.fetch("colors", None, raise_errors=False))
    assert reporter.flush(timeout=20)  # not held back by the window rules: refused, kept aside
    assert reporter.stats()["dead_lettered"] == 1 and reporter.stats()["spooled"] == 0
