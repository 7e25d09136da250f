"""The collector's windows as a Reporter uses them (docs/client.md, "Windows come from
the collector's clock"): the window a report made now is charged to (the current one, or
the next near its end), the rule by which the sender posts spooled reports only in the
window they are charged to (ledger.settle), and asking the collector for its clock
(client/clock.py) while reports wait for it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Literal

from ldptel.client import ledger
from ldptel.client.campaign import CampaignConfig
from ldptel.client.clock import ServerClock
from ldptel.client.config_cache import ConfigCache
from ldptel.client.errors import LdptelError
from ldptel.client.guarantee import Budget
from ldptel.client.ledger import WindowRule
from ldptel.client.settings import Settings
from ldptel.client.statedb import transaction
from ldptel.client.transport import Transport

#: Seconds before a window's end (on the collector's clock) from which a report is charged
#: to the next window, and no batch of the window is posted: a post may take the transport
#: timeout, and the collector's Date is truncated to the second.
WINDOW_MARGIN_EXTRA = 2.0
#: Seconds between prunings of the ledger's past windows (ledger.KEEP_WINDOWS_SECONDS).
PRUNE_EVERY = 3600.0


class Windows:
    """`charged` on report()'s thread; `settle` and `ask_clock` on the sender's."""

    def __init__(
        self,
        settings: Settings,
        clock: ServerClock,
        configs: ConfigCache,
        transport: Transport,
        wake: Callable[[], None],
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._configs = configs
        self._transport = transport
        self._wake = wake
        self._sync_asked = False  # the sender was woken once to learn the collector's clock
        self._prune_at = 0.0  # monotonic: when the ledger's past windows are next pruned
        self._sync_with: str | None = None  # a campaign whose config GET will set the clock

    def _margin(self) -> float:
        return self.settings.timeout + WINDOW_MARGIN_EXTRA

    def charged(self, config: CampaignConfig) -> int:
        """The collector's window a report made now is charged to: the current one, or the
        next when the current ends within the margin (it could not be posted in time)."""
        now = self._clock.now()
        window = config.window_of(now)
        if window + config.window_seconds - now <= self._margin():
            window += config.window_seconds
        return window

    def rule(self, campaign: str, level: str) -> WindowRule | Literal["refused"] | None:
        """(Sender, under the state lock) How this campaign's spooled reports may be posted
        now (ledger.settle); None (held) without a known config, or before the collector's
        clock is known in this process (ldptel.client.clock); ledger.REFUSED if retired."""
        if campaign in self._configs.retired:
            return ledger.REFUSED
        if not self._clock.synced:
            return None
        config = self._configs.for_posting(campaign)
        if config == "retired":
            return ledger.REFUSED
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

    def settle(self, conn: sqlite3.Connection, now: float) -> None:
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
                    self._wake()
        with transaction(conn):
            ledger.settle(conn, now, self.rule)
            if self._clock.synced and time.monotonic() >= self._prune_at:
                ledger.prune(conn, self._clock.now())  # on the collector's clock only
                self._prune_at = time.monotonic() + PRUNE_EVERY
            self._clock.save(conn)

    def ask_clock(self) -> None:
        """(Sender thread) While the collector's clock is unknown in this process and reports
        wait for it, ask for a config only to read the answer's Date (at close too: it is
        delivery)."""
        name = self._sync_with
        if name is not None and not self._clock.synced:
            active = self._configs.active.get(name)
            self._transport.fetch_config(name, active.config.config_id if active else None)
