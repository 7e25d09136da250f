"""The campaigns a Reporter knows: each one's active config (from the disk cache,
client/configs.py, else fetched from the collector on first use), revalidated in the
background when older than config_refresh; what it knows of campaigns without one (retired,
unknown to the collector, unavailable after a failed first fetch); and per privacy level of
an active config, made on first use, its randomizer and budget."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ldptel.client import configs
from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.configs import Known
from ldptel.client.errors import (
    CampaignUnavailableError,
    DeliveryError,
    LdptelError,
    UnknownCampaignError,
)
from ldptel.client.guarantee import Budget
from ldptel.client.memo import Randomizer
from ldptel.client.settings import Settings
from ldptel.client.state import State
from ldptel.client.transport import Transport

LOG = logging.getLogger("ldptel.client")
#: How long an "unknown campaign" answer is believed before asking again.
UNKNOWN_CAMPAIGN_SECONDS = 60.0


@dataclass(frozen=True)
class Level:
    """How a campaign's config reports at one privacy level ("" = it has none)."""

    randomizer: Randomizer
    budget: Budget


@dataclass
class Active:
    """A campaign ready to report: its config, and per level (made on first use) its memo
    and budget."""

    config: CampaignConfig
    fetched_at: float
    index: dict[str, int] = field(init=False)
    by_level: dict[str, Level] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {label: i for i, label in enumerate(self.config.domain)}


class ConfigCache:
    """The campaigns of one Reporter: `get` on report()'s thread, `refresh` and `refused` on
    the sender's; `wake` wakes the sender (to revalidate the configs asked for)."""

    def __init__(
        self,
        settings: Settings,
        state: State,
        transport: Transport,
        wake: Callable[[], None],
        campaigns: Iterable[str],
    ) -> None:
        self.settings = settings
        self._state = state
        self._transport = transport
        self._wake = wake
        self.active: dict[str, Active] = {}
        self.retired: set[str] = set()
        self._unknown: dict[str, float] = {}
        #: Campaigns whose first config fetch failed: (monotonic time to ask again, failures,
        #: reason); until then report() raises at once instead of waiting on the network.
        self.unavailable: dict[str, tuple[float, int, str]] = {}
        self._silent_levels: set[tuple[str, str]] = set()  # (config id, level) logged once
        #: Campaigns whose config the sender is to fetch (or revalidate) in its next round.
        self.stale: set[str] = set(campaigns)

    def get(self, name: str) -> Active | None:
        """The campaign's active config (None if retired); fetched on first use if it is
        not cached, revalidated in the background when older than config_refresh."""
        if type(name) is not str:
            raise UnknownCampaignError("campaign", "must be a campaign name (a string)")
        active = self.active.get(name)
        if active is not None:
            if time.time() - active.fetched_at > self.settings.config_refresh:
                self._request_refresh(name)
            return active
        if name in self.retired:
            return None
        if not NAME_PATTERN.fullmatch(name):
            raise UnknownCampaignError("campaign", "must match [a-z0-9][a-z0-9_-]{0,63}")
        if time.time() - self._unknown.get(name, -1e18) < UNKNOWN_CAMPAIGN_SECONDS:
            raise UnknownCampaignError("campaign", f"the collector does not know {name!r}")
        known = configs.load(self._state.state_dir, name)
        if known is None:
            known = self._first_fetch(name)
        return self.adopt(name, known)

    def _first_fetch(self, name: str) -> Known:
        """Fetch a config never seen; after a failure, raise at once (no request) until a
        backoff of backoff_base * 2^failures (at most backoff_cap) has passed, so an app
        offline from its first start is not blocked `timeout` seconds in every report()."""
        retry_at, failures, reason = self.unavailable.get(name, (0.0, 0, ""))
        left = retry_at - time.monotonic()
        if left > 0:
            raise CampaignUnavailableError("campaign", f"{reason} (asking again in {left:.1f} s)")
        try:
            known = self.fetch(name, None, raise_errors=True)
        except (CampaignUnavailableError, DeliveryError) as error:
            settings = self.settings
            delay = min(settings.backoff_cap, settings.backoff_base * 2.0 ** min(failures, 62))
            self.unavailable[name] = (time.monotonic() + delay, failures + 1, error.reason)
            raise
        self.unavailable.pop(name, None)
        return known

    def fetch(self, name: str, current: CampaignConfig | None, *, raise_errors: bool) -> Known:
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

    def adopt(self, name: str, known: Known) -> Active | None:
        """Make a fetched or cached config the campaign's active one (and cache it)."""
        with self._state.lock:
            conn = self._state.live()
            if known.status in ("active", "retired"):
                configs.store(self._state.state_dir, name, known)
            if known.status == "retired" or known.config is None:
                self.active.pop(name, None)
                if known.status == "retired" and name not in self.retired:
                    self.retired.add(name)
                    LOG.warning("ldptel: campaign %r is retired; its reports are skipped", name)
                return None
            previous = self.active.get(name)
            if previous is not None and previous.config == known.config:
                previous.fetched_at = known.fetched_at
                return previous
            active = Active(known.config, known.fetched_at)
            if not known.config.levels:  # ready now: the first report need not draw the memos
                self.at_level(active, "", conn)
            self.active[name] = active
            return active

    def at_level(self, active: Active, level: str, conn: sqlite3.Connection) -> Level | None:
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
        randomizer = Randomizer(config, conn, self._state.memo_secret, level)
        state = Level(randomizer, Budget.of(config, epsilon))
        active.by_level[level] = state
        return state

    def for_posting(self, campaign: str) -> CampaignConfig | Literal["retired"] | None:
        """(Sender) The config a campaign's spooled reports are posted under: the active one,
        else the cached one; "retired" if the cache says so; None if neither is known."""
        active = self.active.get(campaign)
        if active is not None:
            return active.config
        known = configs.load(self._state.state_dir, campaign)
        if known is not None and known.status == "retired":
            return "retired"
        return known.config if known is not None else None

    def _request_refresh(self, name: str) -> None:
        if name not in self.stale:
            self.stale.add(name)
            self._wake()

    def refresh(self) -> None:
        """(Sender thread) revalidate the configs asked for; failures keep the cached one."""
        while self.stale and not self._state.closed:
            name = self.stale.pop()
            active = self.active.get(name)
            known = self.fetch(name, active.config if active else None, raise_errors=False)
            if known.status != "unknown":  # after a failure too: ask again a period later
                self.adopt(name, known)

    def refused(self, campaign: str) -> None:
        """(Sender thread) the collector refused a batch: perhaps the config changed."""
        self.stale.add(campaign)
