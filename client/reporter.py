"""The app-side SDK: `Reporter(url, token).report(campaign, value)` (docs/client.md).

report() runs on the caller's thread: it checks the value and the privacy ledger, randomizes
the value (ldptel.client.memo: afresh from the OS CSPRNG by default) and writes the perturbed
report to the durable spool, all in one SQLite transaction, before it returns. A background
thread (ldptel.client.sender) batches, gzips and posts the spool to the collector. Windows
are the collector's (ldptel.client.clock). One state_dir per app install: by default in the
platform's user data directory, keyed by the app's ingest token, not by the URL's spelling.

Campaigns with privacy levels (docs/personalized-privacy.md): each report is made at the
user's level, randomized with that level's oracle, charged that level's epsilon, memoized per
level, and sent in batches of one level.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import platformdirs
import xxhash

from ldptel.client import clock, configs, ledger, memo, spool, statedb
from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.clock import ServerClock
from ldptel.client.configs import Known
from ldptel.client.errors import (
    BudgetExhaustedError,
    CampaignUnavailableError,
    InvalidLevelError,
    InvalidValueError,
    LdptelError,
    ParameterError,
    ReporterClosedError,
    UnknownCampaignError,
    ValueTypeError,
)
from ldptel.client.ledger import Budget, Guarantee, Spent, WindowRule
from ldptel.client.levels import LEVEL_NAME
from ldptel.client.memo import Randomizer
from ldptel.client.oracles.base import check_int
from ldptel.client.sender import Sender
from ldptel.client.statedb import transaction
from ldptel.client.transport import Transport

LOG = logging.getLogger("ldptel.client")
SCHEMAS = (ledger.SCHEMA, memo.SCHEMA, spool.SCHEMA, clock.SCHEMA)
#: Seconds before a window's end (on the collector's clock) from which a report is charged
#: to the next window, and no batch of the window is posted: a post may take the transport
#: timeout, and the collector's Date is truncated to the second.
WINDOW_MARGIN_EXTRA = 2.0
#: How long an "unknown campaign" answer is believed before asking again.
UNKNOWN_CAMPAIGN_SECONDS = 60.0
#: report() wakes the sender to checkpoint after this many commits (~2.5 MB of WAL), even
#: when no batch is due (offline, backing off), so the WAL stays bounded (statedb.WAL_LIMIT).
CHECKPOINT_EVERY = 1000


@dataclass(frozen=True)
class Settings:
    """The Reporter's knobs (see Reporter's docstring)."""

    batch_size: int = 500
    max_batch_age: float = 30.0
    on_budget_exhausted: Literal["raise", "skip"] = "raise"
    max_spool_rows: int = 100_000
    max_spool_bytes: int = 32 * 1024 * 1024
    max_dead_letters: int = 10_000
    timeout: float = 10.0
    backoff_base: float = 0.5
    backoff_cap: float = 300.0
    config_refresh: float = 300.0


def default_state_dir(token: str) -> Path:
    """<the platform's user data dir>/ldptel/installs/<hash of the ingest token>
    (platformdirs: ~/.local/share on Linux, ~/Library/Application Support on macOS,
    %LOCALAPPDATA% on Windows). The token names the app to the collector, so the state (one
    install identity, ledger, memo, spool) is the same whatever the URL's spelling."""
    digest = hashlib.sha256(b"ldptel-install:" + token.encode()).hexdigest()[:16]
    return platformdirs.user_data_path("ldptel", appauthor=False) / "installs" / digest


def legacy_state_dir(collector_url: str) -> Path:
    """Where SDKs before one state per install kept it: keyed by the URL's spelling."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "ldptel" / xxhash.xxh64_hexdigest(collector_url.rstrip("/").encode())


def migrate_legacy_state(legacy: Path, state_dir: Path) -> None:
    """Bring an older SDK's state_dir for this URL into the install's: moved whole if the
    install has none yet; else its ledger is added to the install's (its spent epsilon stays
    spent) and its unsent reports are spooled there, under their idempotency keys. It is
    then renamed `<name>.migrated`, so it is folded in once and never used again."""
    if not (legacy / statedb.FILENAME).exists() or legacy.resolve() == state_dir.resolve():
        return
    if not (state_dir / statedb.FILENAME).exists():
        state_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if state_dir.exists():
            shutil.rmtree(state_dir)  # an empty leftover: nothing of value in it
        legacy.rename(state_dir)
        LOG.warning("ldptel: moved the state of %s to %s", legacy, state_dir)
        return
    conn = statedb.open_state(state_dir, SCHEMAS, spool.COLUMNS)
    try:
        statedb.open_state(legacy, SCHEMAS, spool.COLUMNS).close()  # brings it to this schema
        statedb.fold(conn, legacy / statedb.FILENAME)
    finally:
        conn.close()
    for cached in (legacy / "configs").glob("*.json"):
        target = state_dir / "configs" / cached.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(cached, target)
    legacy.rename(legacy.with_name(legacy.name + ".migrated"))
    LOG.warning("ldptel: folded the state of %s into %s", legacy, state_dir)


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
    waits for delivery, `close()` (or a `with` block) stops the sender. Keyword settings:
    batch_size and max_batch_age (seconds) decide when a batch is sent; on_budget_exhausted
    "raise" (BudgetExhaustedError) or "skip" (log, report() returns False); max_spool_rows and
    max_spool_bytes bound the state on disk (oldest windows dropped first); timeout (HTTP,
    seconds); backoff_base/backoff_cap (seconds) for retries; config_refresh (seconds between
    config revalidations); campaigns: names to fetch in the background at start; level: the
    user's privacy level, used for campaigns that declare levels (report(level=...) overrides
    it per call; campaigns without levels ignore it).
    """

    def __init__(
        self,
        collector_url: str,
        token: str,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        campaigns: tuple[str, ...] | list[str] = (),
        level: str | None = None,
        **settings: Any,
    ) -> None:
        self.settings = _check_settings(settings)
        self.level = level
        if not isinstance(collector_url, str) or not collector_url.startswith(
            ("http://", "https://")
        ):
            raise ParameterError("collector_url", "must be an http(s) URL")
        if not isinstance(token, str) or not token:
            raise ParameterError("token", "must be a non-empty string")
        if state_dir:
            self.state_dir = Path(state_dir)
        else:
            self.state_dir = default_state_dir(token)
            migrate_legacy_state(legacy_state_dir(collector_url), self.state_dir)
        self._conn: sqlite3.Connection | None = statedb.open_state(
            self.state_dir, SCHEMAS, spool.COLUMNS
        )
        self._clock = ServerClock(self._conn)
        self._transport = Transport(
            collector_url, token, timeout=self.settings.timeout, on_date=self._clock.observe
        )
        self._checkpoint_conn: sqlite3.Connection | None = None
        with transaction(self._conn):
            self._memo_secret = statedb.secret(self._conn, "memo")
            ledger.migrate(self._conn)
        self._new_sync_objects()
        self._active: dict[str, _Active] = {}
        self._retired: set[str] = set()
        self._unknown: dict[str, float] = {}
        #: Campaigns whose first config fetch failed: (monotonic time to ask again, failures,
        #: reason); until then report() raises at once instead of waiting on the network.
        self._unavailable: dict[str, tuple[float, int, str]] = {}
        self._silent_levels: set[tuple[str, str]] = set()  # (config id, level) logged once
        self._stale: set[str] = set(campaigns)
        self._closed = False
        self._stopping = False
        self._sender: Sender | None = None
        self._flushing = 0
        self._unsent = 0
        self._since_checkpoint = 0
        self._pruned_at = 0.0
        self._posting: int | None = None  # the batch the sender is posting
        self._failures = 0
        self._hold_until = 0.0
        self._batch_limit = self.settings.batch_size
        self._last_error: str | None = None
        _LIVE.add(self)
        if self._stale or spool.rows(self._conn) > 0:  # left from an earlier run: send it
            self._start_sender()

    def _new_sync_objects(self) -> None:
        self._lock = threading.Lock()  # every use of self._conn
        self._checkpoint_lock = threading.Lock()
        self._wake = threading.Event()
        self._progress = threading.Condition()

    # -- the app's API ---------------------------------------------------------------------
    @property
    def level(self) -> str | None:
        """The user's privacy level for campaigns that declare levels (None: not chosen).
        Assign to it when the user changes their choice."""
        return self._level

    @level.setter
    def level(self, level: str | None) -> None:
        self._level = None if level is None else _check_level_name(level)

    def report(self, campaign: str, value: str, *, level: str | None = None) -> bool:
        """Perturb `value` (a label of the campaign's domain) and spool it for sending.

        `level`: the privacy level to report at (default: the Reporter's `level`); required
        for a campaign that declares levels, refused by one that does not. Returns True once
        the perturbed report is in the spool, False if it was skipped (a retired campaign, a
        level that does not report under the campaign's threshold strategy, or a spent budget
        with on_budget_exhausted="skip"). Raises UnknownCampaignError,
        CampaignUnavailableError, InvalidValueError/ValueTypeError, InvalidLevelError,
        BudgetExhaustedError, ReporterClosedError (all LdptelError)."""
        if self._closed:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        active = self._campaign(campaign)
        if active is None:
            return False
        index = self._index_of(active, value)
        name = self._level_of(active.config, level)
        now = time.time()
        config = active.config
        window = self._charged_window(config)
        with self._lock:
            conn = self._live_conn()
            state = self._level_state(active, name, conn)
            if state is None:
                return False
            randomizer = state.randomizer
            try:
                with transaction(conn):
                    wire, cost = randomizer.spend(conn, index)
                    ledger.charge(conn, campaign, window, config.window_seconds, cost, state.budget)
                    spool.append(conn, campaign, randomizer.config_id, window, now, wire, name)
            except BudgetExhaustedError as error:
                if self.settings.on_budget_exhausted == "raise":
                    raise
                LOG.info("ldptel: report to %r skipped: %s", campaign, error)
                return False
            randomizer.committed(index, wire)
            self._unsent += 1
            self._since_checkpoint += 1
            nudge = (
                self._unsent == 1
                or self._unsent >= self._batch_limit
                or self._since_checkpoint >= CHECKPOINT_EVERY
            )
        if self._sender is None:
            self._start_sender()
        elif nudge:
            self._wake.set()
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Send everything spooled now (batch size and age ignored); True once none of it is
        left in the spool (delivered; or dead-lettered or dropped, as stats() counts), False
        if `timeout` seconds pass first (the rest stays spooled). Reports made meanwhile, by
        other threads or processes, are not waited for."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._conn is None:
                return False
            mark = spool.last_id(self._conn)
        with self._progress:
            self._flushing += 1
        try:
            if self._sender is None and not self._stopping:
                self._start_sender()
            self._wake.set()
            while True:
                with self._lock:
                    if self._conn is None:
                        return False
                    if not spool.holds_up_to(self._conn, mark):
                        return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                with self._progress:
                    self._progress.wait(min(left, 0.1))
        finally:
            with self._progress:
                self._flushing -= 1

    def close(self, timeout: float = 2.0) -> None:
        """Try to deliver the spool for up to `timeout` seconds, then stop the sender. What
        is not delivered stays in the spool for the next Reporter on this state_dir."""
        if self._closed:
            return
        self._closed = True
        if self._sender is not None and timeout > 0:
            self.flush(timeout)
        self._stopping = True
        self._wake.set()
        if self._sender is not None:
            self._sender.join(timeout=max(timeout, 0.1))
        with self._checkpoint_lock, self._lock:
            posting = self._posting
            if posting is not None and self._conn is not None:
                # Still waiting on a slow collector: free the batch for the next Reporter of
                # this process (it would wait CLAIM_SECONDS); a resend keeps its key.
                spool.release(self._conn, posting)
            for conn in (self._conn, self._checkpoint_conn):
                if conn is not None:
                    conn.close()
            self._conn = self._checkpoint_conn = None
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

    def stats(self) -> dict[str, Any]:
        """Spool and delivery counters (persisted across restarts): spooled, pending_batches,
        delivered, dead_lettered, dropped, and the last delivery error (None if fine)."""
        with self._lock:
            conn = self._live_conn()
            counters = statedb.counters(conn)
            (batches,) = conn.execute("SELECT count(*) FROM batches").fetchone()
            spooled = spool.rows(conn)
        return {
            "spooled": spooled,
            "pending_batches": int(batches),
            "delivered": counters.get("delivered", 0),
            "dead_lettered": counters.get("dead_lettered", 0),
            "dropped": counters.get("dropped", 0),
            "last_error": self._last_error,
        }

    def privacy_spent(self, campaign: str) -> Spent:
        """Epsilon this client spent on `campaign`: in the current window (the collector's,
        ldptel.client.clock) and for life."""
        active = self._campaign(campaign)
        window = self._charged_window(active.config) if active else 0
        with self._lock:
            return ledger.spent(self._live_conn(), campaign, window)

    def guarantee(self, campaign: str) -> Guarantee | None:
        """The longitudinal guarantee this install's reports to `campaign` have, which the
        ledger enforces (None if the campaign is retired): its `statement`, `holds_for` (any
        two value histories, or, with memoization "exact_discloses_changes", only histories
        with the same change pattern) and what it `discloses`."""
        active = self._campaign(campaign)
        return None if active is None else ledger.guarantee(active.config)

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
        if not self._clock.synced and now >= self._hold_until:
            # Ask the collector at the next round (its Date sets the clock); not woken now,
            # so an offline sender asks once a round (sender.MAX_NAP), never in a loop.
            for (name,) in conn.execute("SELECT DISTINCT campaign FROM spool").fetchall():
                self._stale.add(str(name))
        with transaction(conn):
            ledger.settle(conn, now, self._window_rule)
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
        if not NAME_PATTERN.match(name):
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
        except CampaignUnavailableError as error:
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
        if answer.status == 200:
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
            self._wake.set()

    def _refresh_stale_configs(self) -> None:
        """(Sender thread) revalidate the configs asked for; failures keep the cached one."""
        while self._stale and not self._stopping:
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
    def _index_of(active: _Active, value: object) -> int:
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

    # -- internals shared with the sender ----------------------------------------------------
    def _live_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        return self._conn

    def _start_sender(self) -> None:
        with self._progress:
            if self._sender is None and not self._stopping:
                self._sender = Sender(self)
                self._sender.start()

    def _notify_progress(self) -> None:
        with self._progress:
            self._progress.notify_all()
        self._unsent = 0

    def _checkpoint(self) -> None:
        """(Sender thread) copy the WAL into the database on a second connection, so the
        fsync never holds the lock report() takes; truncate the WAL when it grew too large."""
        with self._checkpoint_lock:
            if self._conn is None:
                return
            if self._checkpoint_conn is None:
                self._checkpoint_conn = statedb.open_state(self.state_dir, ())
            self._since_checkpoint = 0
            statedb.checkpoint(self._checkpoint_conn, self.state_dir)

    # -- fork ----------------------------------------------------------------------------------
    def _before_fork(self) -> None:
        # No transaction may be open across fork(), and SQLite connections must not be
        # inherited: close them with the locks held, reopen on both sides.
        self._checkpoint_lock.acquire()
        self._lock.acquire()
        for conn in (self._conn, self._checkpoint_conn):
            if conn is not None:
                conn.close()
        self._checkpoint_conn = None
        self._reopen = self._conn is not None
        self._conn = None

    def _after_fork_parent(self) -> None:
        if self._reopen:
            self._conn = statedb.open_state(self.state_dir, ())
        self._lock.release()
        self._checkpoint_lock.release()

    def _after_fork_child(self) -> None:
        self._new_sync_objects()
        if self._reopen:
            self._conn = statedb.open_state(self.state_dir, ())
        self._sender = None  # threads do not survive fork; report() starts a new one
        self._posting = None  # the parent's sender posts its batch
        self._transport.reset()
        self._flushing = 0


def _check_settings(given: dict[str, Any]) -> Settings:
    known = Settings.__dataclass_fields__
    for name in given:
        if name not in known:
            raise ParameterError(name, "unknown Reporter setting")
    settings = Settings(**given)
    check_int(settings.batch_size, "batch_size", 1, 5_000)
    check_int(settings.max_spool_rows, "max_spool_rows", 1)
    check_int(settings.max_spool_bytes, "max_spool_bytes", 64 * 1024)
    check_int(settings.max_dead_letters, "max_dead_letters", 0)
    for name in ("max_batch_age", "timeout", "backoff_base", "backoff_cap", "config_refresh"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ParameterError(name, "must be a number of seconds > 0")
    if settings.on_budget_exhausted not in ("raise", "skip"):
        raise ParameterError("on_budget_exhausted", 'must be "raise" or "skip"')
    return settings


def _check_level_name(level: object) -> str:
    if not isinstance(level, str) or not LEVEL_NAME.match(level):
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
