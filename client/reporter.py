"""The app-side SDK: `Reporter(url, token).report(campaign, value)` (docs/client.md).

report() runs on the caller's thread: it checks the value and the privacy ledger, randomizes
the value (ldptel.client.memo: afresh from the OS CSPRNG by default) and writes the perturbed
report to the durable spool, all in one SQLite transaction, before it returns. A background
thread (ldptel.client.sender) batches, gzips and posts the spool to the collector. Windows
are the collector's (ldptel.client.clock). One state_dir per app install: by default in the
platform's user data directory, keyed by the app's ingest token, not by the URL's spelling.

Campaigns with privacy levels (docs/personalized-privacy.md): each report is made at the
user's level, randomized with that level's oracle, charged that level's epsilon (memoized
per level under the opt-in exact memoization), and sent in batches of one level.

`Reporter` is the app's API over its parts, each in its own module: the state database's
connection and lock (state.py), the campaigns' configs (config_cache.py), the collector's
windows (windows.py), the steps of one report() (pipeline.py, values.py), what report() and
stats() tell the app (stats.py), delivery (sender.py), fork and exit (lifecycle.py).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ldptel.client import ledger, lifecycle, spool
from ldptel.client.clock import ServerClock
from ldptel.client.config_cache import ConfigCache
from ldptel.client.errors import ParameterError
from ldptel.client.guarantee import Guarantee, guarantee
from ldptel.client.install import default_state_dir, legacy_state_dir
from ldptel.client.ledger import Spent
from ldptel.client.pipeline import Pipeline, check_level_name
from ldptel.client.sender import Campaigns, Connections, Sender
from ldptel.client.settings import SettingsArgs, check_settings
from ldptel.client.state import State
from ldptel.client.stats import Outcomes, Stats, read_stats
from ldptel.client.status import ReportStatus, as_ldptel_error
from ldptel.client.transport import Transport
from ldptel.client.windows import Windows

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Reporter", "Stats"]


class Reporter:
    """Report values to an ldptel collector under local differential privacy.

    `Reporter(collector_url, token, state_dir=...)` then `report(campaign, value)`; `flush()`
    waits for delivery, `close()` (or a `with` block, or the interpreter's exit) stops the
    sender. Keyword settings: batch_size and max_batch_age (seconds) decide when a batch is
    sent; max_spool_rows and max_spool_bytes bound the state on disk (oldest windows dropped
    first); timeout (HTTP, seconds); backoff_base/backoff_cap (seconds) for retries;
    config_refresh (seconds between config revalidations); strict: report() raises its
    errors (for tests) instead of returning a status; enabled=False: report nothing, touch
    neither disk nor network; on_error: called with each error report() returns a status for,
    and from the sender's thread with each new DeliveryError; exit_timeout: seconds to
    deliver the spool at exit (0: none); auth_wait: seconds reports refused with a 401/403
    wait for a fixed token before they are dead-lettered (default a week); campaigns: names
    to fetch in the background at start; level: the user's privacy level, used for
    campaigns that declare levels (report(level=...) overrides it per call; campaigns
    without levels ignore it).
    Bad settings raise ParameterError here; nothing else does (unless strict).
    """

    def __init__(
        self,
        collector_url: str,
        token: str,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        campaigns: tuple[str, ...] | list[str] = (),
        level: str | None = None,
        **settings: Unpack[SettingsArgs],
    ) -> None:
        self.settings = check_settings(dict(settings))
        self.level = level
        if not isinstance(collector_url, str) or not collector_url.startswith(
            ("http://", "https://")
        ):
            raise ParameterError("collector_url", "must be an http(s) URL")
        if not isinstance(token, str) or not token:
            raise ParameterError("token", "must be a non-empty string")
        self.state_dir = Path(state_dir) if state_dir else default_state_dir(token)
        clock = ServerClock()
        self._transport = Transport(
            collector_url, token, timeout=self.settings.timeout, on_date=clock.observe
        )
        state = self._state = State(
            self.state_dir, None if state_dir else legacy_state_dir(collector_url), clock
        )
        wake = self._wake_sender  # (the sender is made below: they call it later)
        self._configs = ConfigCache(self.settings, state, self._transport, wake, campaigns)
        self._windows = Windows(self.settings, clock, self._configs, self._transport, wake)
        self._sender = Sender(
            self.settings,
            self.state_dir,
            self._transport,
            Connections(state.lock, lambda: state.conn),
            Campaigns(self._refresh, self._configs.refused, self._windows.settle),
        )
        self._pipeline = Pipeline(state, self._configs, self._windows, self._sender)
        self._outcomes = Outcomes(self.settings, self._sender.disk_full)
        if not self.settings.enabled:
            return
        lifecycle.add(self)
        try:  # no other thread yet: no lock needed
            conn = state.open()
        except (sqlite3.Error, OSError) as raw:
            self._outcomes.refused(raw, "opening the state")  # raises if strict
            return
        self._sender.make_reserve()
        if self._configs.stale or spool.rows(conn) > 0:  # left from an earlier run: send it
            self._sender.start()

    # -- the app's API ---------------------------------------------------------------------
    @property
    def level(self) -> str | None:
        """The user's privacy level for campaigns that declare levels (None: not chosen).
        Assign to it when the user changes their choice."""
        return self._level

    @level.setter
    def level(self, level: str | None) -> None:
        self._level = None if level is None else check_level_name(level)

    def report(
        self, campaign: str, value: str | float | Mapping[str, str], *, level: str | None = None
    ) -> ReportStatus:
        """Perturb `value` (a label of the campaign's domain; any text of at most `max_length`
        UTF-8 bytes for an open-domain campaign; for a numeric campaign a number, clipped into
        its range: below it counts as its low end, above as its high end; for a breakdown
        campaign one label of every attribute, {"os": "ios", "plan": "pro"}) and spool it for
        sending.

        `level`: the privacy level to report at (default: the Reporter's `level`); required
        for a campaign that declares levels, refused by one that does not. Never raises (but
        with strict=True): returns ReportStatus.SPOOLED (the only truthy status) once the
        perturbed report is in the spool, else why not: RETIRED, LEVEL_NOT_COLLECTED (a level
        below the threshold strategy's), DISABLED, or an error's status (BUDGET_EXHAUSTED,
        UNKNOWN_CAMPAIGN, CAMPAIGN_UNAVAILABLE, INVALID_VALUE, INVALID_LEVEL, DISK_FULL,
        STATE_ERROR, CLOSED, INTERNAL_ERROR), whose LdptelError goes to on_error (and is
        raised with strict=True). Every status but SPOOLED is counted in stats()."""
        if not self.settings.enabled:
            status = ReportStatus.DISABLED
        else:
            try:
                status = self._pipeline.report(campaign, value, level, self._level)
            except Exception as raw:  # the app must not break: a status instead
                return self._outcomes.refused(raw, f"report to {campaign!r}")
        if status is not ReportStatus.SPOOLED:
            self._outcomes.count(status)
        return status

    def flush(self, timeout: float = 10.0) -> bool:
        """Send everything spooled now (batch size and age ignored); True once none of it is
        left in the spool (delivered; or dead-lettered or dropped, as stats() counts), False
        if `timeout` seconds pass first (the rest stays spooled). Reports made meanwhile, by
        other threads or processes, are not waited for."""
        if not self.settings.enabled:
            return True
        return self._sender.flush(timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Try to deliver the spool for up to `timeout` seconds, then stop the sender. What
        is not delivered stays in the spool for the next Reporter on this state_dir. Runs at
        the interpreter's exit (atexit, with exit_timeout) for a Reporter not closed."""
        if self._state.closed:
            return
        self._state.closed = True
        deadline = time.monotonic() + timeout
        if timeout > 0 and self._state.conn is not None:
            self._sender.flush(timeout)
        self._sender.stop(deadline - time.monotonic())
        self._state.close()
        lifecycle.discard(self)

    def __enter__(self) -> Reporter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def stats(self) -> Stats:
        """Spool and delivery counters (persisted across restarts): spooled, pending_batches,
        delivered, dead_lettered, dropped; last_error, the last delivery error (None if
        fine); not_spooled, this process's report() calls by status, for every status but
        "spooled"; awaiting_token, the spooled reports the collector refused the token for,
        and awaiting_token_until, the Unix time the first of them is dead-lettered unless a
        fixed token delivers them (None if none). The counters on disk read 0 when the state
        cannot be read."""
        return read_stats(self._state, self._outcomes, self._sender, self.settings.auth_wait)

    def privacy_spent(self, campaign: str) -> Spent:
        """Epsilon this client spent on `campaign`: in the current window (the collector's,
        ldptel.client.clock) and for life. Raises LdptelError (the state unreadable:
        StateError; UnknownCampaignError, ...)."""
        if not self.settings.enabled:
            return Spent(0, 0.0, 0.0)
        try:
            active = self._configs.get(campaign)
            window = self._windows.charged(active.config) if active else 0
            with self._state.lock:
                return ledger.spent(self._state.live(), campaign, window)
        except (sqlite3.Error, OSError) as raw:
            raise as_ldptel_error(raw) from raw

    def guarantee(self, campaign: str) -> Guarantee | None:
        """The longitudinal guarantee this install's reports to `campaign` have, which the
        ledger enforces (None if the campaign is retired): its `statement`, `holds_for` (any
        two value histories, or, with memoization "exact_discloses_changes", only histories
        with the same change pattern) and what it `discloses`. Raises LdptelError."""
        active = self._configs.get(campaign)
        return None if active is None else guarantee(active.config)

    # -- the sender's ---------------------------------------------------------------------------
    def _wake_sender(self) -> None:
        self._sender.wake()

    def _refresh(self) -> None:
        """(Sender thread) learn the collector's clock if reports wait for it, then
        revalidate the configs asked for."""
        self._windows.ask_clock()
        self._configs.refresh()

    # -- fork (lifecycle.py calls these) --------------------------------------------------------
    def _before_fork(self) -> None:
        self._sender.before_fork()
        self._state.before_fork()

    def _after_fork_parent(self) -> None:
        self._state.after_fork()
        self._sender.after_fork_parent()

    def _after_fork_child(self) -> None:
        # The forking thread holds both locks here (and no other thread exists): release.
        self._state.after_fork()
        self._outcomes.after_fork_child()
        self._sender.after_fork_child()
