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
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import os
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ldptel.client import configs, ledger, spool, statedb
from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.campaign_kinds import Breakdown
from ldptel.client.clock import ServerClock
from ldptel.client.configs import Known
from ldptel.client.errors import (
    CampaignUnavailableError,
    DeliveryError,
    DiskFullError,
    InvalidLevelError,
    InvalidValueError,
    LdptelError,
    ParameterError,
    ReporterClosedError,
    StateError,
    UnknownCampaignError,
    ValueTypeError,
)
from ldptel.client.guarantee import Budget, Guarantee, guarantee
from ldptel.client.install import SCHEMAS, default_state_dir, legacy_state_dir, migrate_legacy_state
from ldptel.client.ledger import Spent, WindowRule
from ldptel.client.levels import LEVEL_NAME
from ldptel.client.memo import Randomizer, Value
from ldptel.client.sender import Campaigns, Connections, Sender
from ldptel.client.settings import SettingsArgs, check_settings
from ldptel.client.statedb import transaction
from ldptel.client.status import ReportStatus, as_ldptel_error, status_of
from ldptel.client.transport import Transport

if TYPE_CHECKING:
    from typing_extensions import Unpack

LOG = logging.getLogger("ldptel.client")
#: Seconds before a window's end (on the collector's clock) from which a report is charged
#: to the next window, and no batch of the window is posted: a post may take the transport
#: timeout, and the collector's Date is truncated to the second.
WINDOW_MARGIN_EXTRA = 2.0
#: How long an "unknown campaign" answer is believed before asking again.
UNKNOWN_CAMPAIGN_SECONDS = 60.0
#: Seconds between prunings of the ledger's past windows (ledger.KEEP_WINDOWS_SECONDS).
PRUNE_EVERY = 3600.0
#: A state database that could not be opened is tried again after this long.
STATE_RETRY_SECONDS = 30.0


class Stats(TypedDict):
    """Reporter.stats(): the spool's and delivery's counters (persisted in state_dir), the
    last delivery error, and this process's report() calls that spooled nothing, by status."""

    spooled: int
    pending_batches: int
    delivered: int
    dead_lettered: int
    dropped: int
    last_error: str | None
    not_spooled: dict[str, int]
    awaiting_token: int
    awaiting_token_until: float | None


@dataclass(frozen=True)
class _Level:
    """How a campaign's config reports at one privacy level ("" = it has none)."""

    randomizer: Randomizer
    budget: Budget


@dataclass
class _Active:
    """A campaign ready to report: its config, and per level (made on first use) its memo
    and budget."""

    config: CampaignConfig
    fetched_at: float
    index: dict[str, int] = field(init=False)
    by_level: dict[str, _Level] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {label: i for i, label in enumerate(self.config.domain)}


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
        #: An older SDK's state for this URL, folded in when the state is opened.
        self._legacy = None if state_dir else legacy_state_dir(collector_url)
        self._clock = ServerClock()
        self._sync_asked = False  # the sender was woken once to learn the collector's clock
        self._prune_at = 0.0  # monotonic: when the ledger's past windows are next pruned
        self._sync_with: str | None = None  # a campaign whose config GET will set the clock
        self._transport = Transport(
            collector_url, token, timeout=self.settings.timeout, on_date=self._clock.observe
        )
        self._lock = threading.Lock()  # every use of self._conn
        self._conn: sqlite3.Connection | None = None
        self._state_failed_at = -STATE_RETRY_SECONDS
        self._memo_secret = b""
        self._sender = Sender(
            self.settings,
            self.state_dir,
            self._transport,
            Connections(self._lock, lambda: self._conn),
            Campaigns(self._refresh_stale_configs, self._config_refused, self._settle),
        )
        self._not_spooled: Counter[ReportStatus] = Counter()
        self._lock_counts = threading.Lock()
        self._logged: set[ReportStatus] = set()
        self._active: dict[str, _Active] = {}
        self._retired: set[str] = set()
        self._unknown: dict[str, float] = {}
        #: Campaigns whose first config fetch failed: (monotonic time to ask again, failures,
        #: reason); until then report() raises at once instead of waiting on the network.
        self._unavailable: dict[str, tuple[float, int, str]] = {}
        self._silent_levels: set[tuple[str, str]] = set()  # (config id, level) logged once
        self._stale: set[str] = set(campaigns)
        self._closed = False
        if not self.settings.enabled:
            return
        _LIVE.add(self)
        try:  # no other thread yet: no lock needed
            conn = self._open_state()
        except (sqlite3.Error, OSError) as raw:
            self._state_failed_at = time.monotonic()
            self._refused(raw, "opening the state")  # raises if strict
            return
        self._sender.make_reserve()
        if self._stale or spool.rows(conn) > 0:  # left from an earlier run: send it
            self._sender.start()

    def _open_state(self) -> sqlite3.Connection:
        """(Under the state lock) open the state database, migrating an older one."""
        if self._legacy is not None:
            migrate_legacy_state(self._legacy, self.state_dir)
            self._legacy = None
        conn = statedb.open_state(self.state_dir, SCHEMAS, spool.COLUMNS)
        try:
            with transaction(conn):
                self._memo_secret = statedb.secret(conn, "memo")
                ledger.migrate(conn)
            self._clock.load(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    # -- the app's API ---------------------------------------------------------------------
    @property
    def level(self) -> str | None:
        """The user's privacy level for campaigns that declare levels (None: not chosen).
        Assign to it when the user changes their choice."""
        return self._level

    @level.setter
    def level(self, level: str | None) -> None:
        self._level = None if level is None else _check_level_name(level)

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
                status = self._report(campaign, value, level)
            except Exception as raw:  # the app must not break: a status instead
                return self._refused(raw, f"report to {campaign!r}")
        if status is not ReportStatus.SPOOLED:
            self._count(status)
        return status

    def _report(
        self, campaign: str, value: str | float | Mapping[str, str], level: str | None
    ) -> ReportStatus:
        if self._closed:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        active = self._campaign(campaign)
        if active is None:
            return ReportStatus.RETIRED
        randomized = self._value_of(active, value)
        name = self._level_of(active.config, level)
        if not self._sender.accepting():
            raise DiskFullError("state_dir", "disk full; reports resume once the spool is sent")
        now = time.time()
        config = active.config
        window = self._charged_window(config)
        with self._lock:
            conn = self._live_conn()
            state = self._level_state(active, name, conn)
            if state is None:
                return ReportStatus.LEVEL_NOT_COLLECTED
            randomizer = state.randomizer
            with transaction(conn):
                wire, cost = randomizer.spend(conn, randomized, window)
                ledger.charge(conn, campaign, window, config.window_seconds, cost, state.budget)
                spool.append(conn, campaign, randomizer.config_id, window, now, wire, name)
            randomizer.committed(randomized, wire)
            nudge = self._sender.spooled()
        if nudge:
            self._sender.wake()
        return ReportStatus.SPOOLED

    def _refused(self, raw: Exception, what: str) -> ReportStatus:
        """An error instead of a report (or of opening the state): counted, logged (the first
        time per status), passed to on_error; raised if strict, else its status returned."""
        error = as_ldptel_error(raw)
        status = status_of(error)
        self._count(status)
        if isinstance(error, DiskFullError):
            self._sender.disk_full()
        first = status not in self._logged
        self._logged.add(status)
        if status is ReportStatus.INTERNAL_ERROR:
            LOG.error("ldptel: %s failed: %s", what, error, exc_info=raw if first else None)
        elif status is ReportStatus.BUDGET_EXHAUSTED:
            LOG.info("ldptel: %s skipped: %s", what, error)
        else:
            LOG.log(logging.WARNING if first else logging.DEBUG, "ldptel: %s: %s", what, error)
        if self.settings.on_error is not None:
            try:
                self.settings.on_error(error)
            except Exception:
                LOG.exception("ldptel: the on_error callback raised")
        if self.settings.strict:
            if error is raw:
                raise error
            raise error from raw
        return status

    def _count(self, status: ReportStatus) -> None:
        with self._lock_counts:
            self._not_spooled[status] += 1

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
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        if timeout > 0 and self._conn is not None:
            self._sender.flush(timeout)
        self._sender.stop(deadline - time.monotonic())
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None
        _LIVE.discard(self)

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
        counters: dict[str, int] = {}
        batches = spooled = awaiting = 0
        refused_at: float | None = None
        with self._lock:
            if self._conn is not None:
                try:
                    counters = statedb.counters(self._conn)
                    (batches,) = self._conn.execute("SELECT count(*) FROM batches").fetchone()
                    spooled = spool.rows(self._conn)
                    awaiting, refused_at = spool.awaiting_token(self._conn)
                except sqlite3.Error as error:
                    LOG.warning("ldptel: stats() cannot read the state: %s", error)
        with self._lock_counts:
            not_spooled = {status.value: n for status, n in self._not_spooled.items()}
        return {
            "spooled": spooled,
            "pending_batches": int(batches),
            "delivered": counters.get("delivered", 0),
            "dead_lettered": counters.get("dead_lettered", 0),
            "dropped": counters.get("dropped", 0),
            "last_error": self._sender.last_error,
            "not_spooled": not_spooled,
            "awaiting_token": awaiting,
            "awaiting_token_until": (
                None if refused_at is None else refused_at + self.settings.auth_wait
            ),
        }

    def privacy_spent(self, campaign: str) -> Spent:
        """Epsilon this client spent on `campaign`: in the current window (the collector's,
        ldptel.client.clock) and for life. Raises LdptelError (the state unreadable:
        StateError; UnknownCampaignError, ...)."""
        if not self.settings.enabled:
            return Spent(0, 0.0, 0.0)
        try:
            active = self._campaign(campaign)
            window = self._charged_window(active.config) if active else 0
            with self._lock:
                return ledger.spent(self._live_conn(), campaign, window)
        except (sqlite3.Error, OSError) as raw:
            raise as_ldptel_error(raw) from raw

    def guarantee(self, campaign: str) -> Guarantee | None:
        """The longitudinal guarantee this install's reports to `campaign` have, which the
        ledger enforces (None if the campaign is retired): its `statement`, `holds_for` (any
        two value histories, or, with memoization "exact_discloses_changes", only histories
        with the same change pattern) and what it `discloses`. Raises LdptelError."""
        active = self._campaign(campaign)
        return None if active is None else guarantee(active.config)

    # -- windows -------------------------------------------------------------------------------
    def _margin(self) -> float:
        return self.settings.timeout + WINDOW_MARGIN_EXTRA

    def _charged_window(self, config: CampaignConfig) -> int:
        """The collector's window a report made now is charged to: the current one, or the
        next when the current ends within the margin (it could not be posted in time)."""
        now = self._clock.now()
        window = config.window_of(now)
        if window + config.window_seconds - now <= self._margin():
            window += config.window_seconds
        return window

    def _window_rule(self, campaign: str, level: str) -> WindowRule | Literal["refused"] | None:
        """(Sender, under the state lock) How this campaign's spooled reports may be posted
        now (ledger.settle); None (held) without a known config, or before the collector's
        clock is known in this process (ldptel.client.clock); ledger.REFUSED if retired."""
        if campaign in self._retired:
            return ledger.REFUSED
        if not self._clock.synced:
            return None
        active = self._active.get(campaign)
        config = active.config if active is not None else None
        if config is None:
            known = configs.load(self.state_dir, campaign)
            if known is not None and known.status == "retired":
                return ledger.REFUSED
            config = known.config if known is not None else None
        if config is None:
            return None
        try:  # a row of a level the campaign's current config no longer has: held
            epsilon = config.reporting_epsilon(level)
        except LdptelError:
            return None
        if epsilon is None:
            return None
        now = self._clock.now()
        window = config.window_of(now)
        next_in = window + config.window_seconds - now
        return WindowRule(
            window=window,
            window_seconds=config.window_seconds,
            postable=next_in > self._margin(),
            next_window_in=next_in,
            cost=epsilon,
            budget=Budget.of(config, epsilon),
        )

    def _settle(self, conn: sqlite3.Connection, now: float) -> None:
        """(Sender, under the state lock) Spooled reports go out only in the collector's
        window they are charged to (ledger.settle); the clock's state is saved with it."""
        if not self._clock.synced:
            # Ask the collector (its Date sets the clock) in the next round: at once the first
            # time, then once a round (sender.MAX_NAP), so an offline sender never loops.
            first = conn.execute("SELECT campaign FROM spool LIMIT 1").fetchone()
            if first is not None:
                self._sync_with = str(first[0])
                if not self._sync_asked:
                    self._sync_asked = True
                    self._sender.wake()
        with transaction(conn):
            ledger.settle(conn, now, self._window_rule)
            if self._clock.synced and time.monotonic() >= self._prune_at:
                ledger.prune(conn, self._clock.now())  # on the collector's clock only
                self._prune_at = time.monotonic() + PRUNE_EVERY
            self._clock.save(conn)

    # -- campaigns ---------------------------------------------------------------------------
    def _campaign(self, name: str) -> _Active | None:
        """The campaign's active config (None if retired); fetched on first use if it is
        not cached, revalidated in the background when older than config_refresh."""
        if type(name) is not str:
            raise UnknownCampaignError("campaign", "must be a campaign name (a string)")
        active = self._active.get(name)
        if active is not None:
            if time.time() - active.fetched_at > self.settings.config_refresh:
                self._request_refresh(name)
            return active
        if name in self._retired:
            return None
        if not NAME_PATTERN.fullmatch(name):
            raise UnknownCampaignError("campaign", "must match [a-z0-9][a-z0-9_-]{0,63}")
        if time.time() - self._unknown.get(name, -1e18) < UNKNOWN_CAMPAIGN_SECONDS:
            raise UnknownCampaignError("campaign", f"the collector does not know {name!r}")
        known = configs.load(self.state_dir, name)
        if known is None:
            known = self._first_fetch(name)
        return self._adopt(name, known)

    def _first_fetch(self, name: str) -> Known:
        """Fetch a config never seen; after a failure, raise at once (no request) until a
        backoff of backoff_base * 2^failures (at most backoff_cap) has passed, so an app
        offline from its first start is not blocked `timeout` seconds in every report()."""
        retry_at, failures, reason = self._unavailable.get(name, (0.0, 0, ""))
        left = retry_at - time.monotonic()
        if left > 0:
            raise CampaignUnavailableError("campaign", f"{reason} (asking again in {left:.1f} s)")
        try:
            known = self._fetch(name, None, raise_errors=True)
        except (CampaignUnavailableError, DeliveryError) as error:
            settings = self.settings
            delay = min(settings.backoff_cap, settings.backoff_base * 2.0 ** min(failures, 62))
            self._unavailable[name] = (time.monotonic() + delay, failures + 1, error.reason)
            raise
        self._unavailable.pop(name, None)
        return known

    def _fetch(self, name: str, current: CampaignConfig | None, *, raise_errors: bool) -> Known:
        """Ask the collector for the campaign's config (conditional on `current`)."""
        answer = self._transport.fetch_config(name, current.config_id if current else None)
        now = time.time()
        if answer.status == 304 and current is not None:
            return Known("active", current, now)
        if answer.problem is not None:  # a refused token, a redirect elsewhere, not the collector
            if raise_errors:
                raise answer.problem
            reason = answer.reason
        elif answer.status == 200:
            try:
                return Known("active", configs.parse_answer(answer), now)
            except LdptelError as error:
                reason = f"the collector's config is invalid ({error})"
        elif answer.status == 404:
            self._unknown[name] = now
            if raise_errors:
                raise UnknownCampaignError("campaign", f"the collector does not know {name!r}")
            reason = "unknown campaign"
        elif answer.status == 410:
            return Known("retired", None, now)
        else:
            reason = answer.reason or f"HTTP {answer.status}"
        if raise_errors:
            raise CampaignUnavailableError("campaign", f"no config for {name!r} yet: {reason}")
        LOG.info("ldptel: config of %r not refreshed: %s", name, reason)
        return Known("active", current, now) if current else Known("unknown", None, now)

    def _adopt(self, name: str, known: Known) -> _Active | None:
        """Make a fetched or cached config the campaign's active one (and cache it)."""
        with self._lock:
            conn = self._live_conn()
            if known.status in ("active", "retired"):
                configs.store(self.state_dir, name, known)
            if known.status == "retired" or known.config is None:
                self._active.pop(name, None)
                if known.status == "retired" and name not in self._retired:
                    self._retired.add(name)
                    LOG.warning("ldptel: campaign %r is retired; its reports are skipped", name)
                return None
            previous = self._active.get(name)
            if previous is not None and previous.config == known.config:
                previous.fetched_at = known.fetched_at
                return previous
            active = _Active(known.config, known.fetched_at)
            if not known.config.levels:  # ready now: the first report need not draw the memos
                self._level_state(active, "", conn)
            self._active[name] = active
            return active

    def _request_refresh(self, name: str) -> None:
        if name not in self._stale:
            self._stale.add(name)
            self._sender.wake()

    def _refresh_stale_configs(self) -> None:
        """(Sender thread) revalidate the configs asked for; failures keep the cached one.
        Also, while the collector's clock is unknown in this process and reports wait for it,
        ask for a config only to read the answer's Date (at close too: it is delivery)."""
        name = self._sync_with
        if name is not None and not self._clock.synced:
            active = self._active.get(name)
            self._transport.fetch_config(name, active.config.config_id if active else None)
        while self._stale and not self._closed:
            name = self._stale.pop()
            active = self._active.get(name)
            known = self._fetch(name, active.config if active else None, raise_errors=False)
            if known.status != "unknown":  # after a failure too: ask again a period later
                self._adopt(name, known)

    def _config_refused(self, campaign: str) -> None:
        """(Sender thread) the collector refused a batch: perhaps the config changed."""
        self._stale.add(campaign)

    # -- values and levels -------------------------------------------------------------------
    @staticmethod
    def _value_of(active: _Active, value: object) -> Value:
        """What the randomizer takes: a label's index in the domain, an open-domain
        campaign's text in NFC (CampaignConfig.open_value), a numeric campaign's number
        (any finite or infinite int or float; the mechanism clips it), or a breakdown
        campaign's row {attribute: label} as its joint index (Breakdown.row_index)."""
        if isinstance(active.config.kind, Breakdown):
            return active.config.kind.row_index(value)
        if active.config.open_domain:
            return active.config.open_value(value)
        if active.config.numeric:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueTypeError("value", f"must be a number, got {type(value).__name__}")
            try:
                number = float(value)
            except OverflowError:  # an int (or Fraction) beyond a double: clipped as +-inf
                number = math.inf if value > 0 else -math.inf  # type: ignore[operator]
            if math.isnan(number):
                raise InvalidValueError("value", "must be a number, got NaN")
            return number
        if not isinstance(value, str):
            raise ValueTypeError("value", f"must be a string label, got {type(value).__name__}")
        index = active.index.get(value)
        if index is None:
            config = active.config
            if config.other_label is None:
                raise InvalidValueError("value", f"not in the domain of campaign {config.name!r}")
            index = active.index[config.other_label]
        return index

    def _level_of(self, config: CampaignConfig, level: object) -> str:
        """The level a report is made at ("" for a campaign without levels), checked by the
        campaign's level rule. The Reporter's own level applies only to campaigns that
        declare levels; a level passed to report() applies to every campaign."""
        if level is not None:
            name = _check_level_name(level)
        elif config.levels:
            name = self._level or ""
        else:
            return ""
        config.reporting_epsilon(name)  # raises InvalidLevelError
        return name

    def _level_state(self, active: _Active, level: str, conn: sqlite3.Connection) -> _Level | None:
        """The randomizer and budget of a config at `level` (made on first use, under the
        state lock); None if the level does not report (threshold strategy), logged once."""
        state = active.by_level.get(level)
        if state is not None:
            return state
        config = active.config
        epsilon = config.reporting_epsilon(level)
        if epsilon is None:
            if (config.config_id, level) not in self._silent_levels:
                self._silent_levels.add((config.config_id, level))
                LOG.info(
                    "ldptel: campaign %r collects no reports at privacy level %r "
                    "(level_strategy threshold %g); they are skipped",
                    config.name,
                    level,
                    config.level_threshold,
                )
            return None
        randomizer = Randomizer(config, conn, self._memo_secret, level)
        state = _Level(randomizer, Budget.of(config, epsilon))
        active.by_level[level] = state
        return state

    # -- the state database ------------------------------------------------------------------
    def _live_conn(self) -> sqlite3.Connection:
        """(Under the state lock) the state connection; opened again if it could not be
        (at most every STATE_RETRY_SECONDS)."""
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        if time.monotonic() - self._state_failed_at < STATE_RETRY_SECONDS:
            raise StateError("state_dir", "could not be opened; trying again shortly")
        try:
            return self._open_state()
        except (sqlite3.Error, OSError):
            self._state_failed_at = time.monotonic()
            raise

    # -- fork ----------------------------------------------------------------------------------
    def _before_fork(self) -> None:
        # No transaction may be open across fork(), and SQLite connections must not be
        # inherited: close them with the locks held, reopen on both sides.
        self._sender.before_fork()
        self._lock.acquire()
        if self._conn is not None:
            self._conn.close()
        self._reopen = self._conn is not None
        self._conn = None

    def _reopen_state(self) -> None:
        if self._reopen:
            try:
                self._conn = statedb.open_state(self.state_dir, ())
            except (sqlite3.Error, OSError):  # _live_conn tries again
                self._state_failed_at = -STATE_RETRY_SECONDS

    def _after_fork_parent(self) -> None:
        self._reopen_state()
        self._lock.release()
        self._sender.after_fork_parent()

    def _after_fork_child(self) -> None:
        # The forking thread holds both locks here (and no other thread exists): release.
        self._reopen_state()
        self._lock.release()
        self._lock_counts = threading.Lock()
        self._sender.after_fork_child()


def _check_level_name(level: object) -> str:
    if not isinstance(level, str) or not LEVEL_NAME.fullmatch(level):
        raise InvalidLevelError("level", "must be a privacy level name ([a-z0-9_-]{1,32})")
    return level


#: Reporters alive in this process, for the fork hooks (weak: a dropped Reporter is gone).
_LIVE: weakref.WeakSet[Reporter] = weakref.WeakSet()


def _each(method: str) -> Any:
    def hook() -> None:
        for reporter in list(_LIVE):
            getattr(reporter, method)()

    return hook


os.register_at_fork(
    before=_each("_before_fork"),
    after_in_parent=_each("_after_fork_parent"),
    after_in_child=_each("_after_fork_child"),
)


@atexit.register
def _close_at_exit() -> None:
    """Deliver what the app did not close() (posthog-python and sentry-sdk do the same): up
    to each Reporter's exit_timeout; the rest stays spooled for the next run."""
    for reporter in list(_LIVE):
        try:
            reporter.close(timeout=reporter.settings.exit_timeout)
        except Exception:  # exiting anyway: never turn an exit into a traceback
            LOG.exception("ldptel: closing a Reporter at exit failed")
