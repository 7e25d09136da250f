"""One report() on the caller's thread, from the app's arguments to the spool (docs/client.md,
"What happens on report()"): the campaign's active config (client/config_cache.py), the value
as its randomizer takes it (client/values.py), the level by the campaign's level rule, the
window it is charged to (client/windows.py); then, under the state lock and in one SQLite
transaction, the randomized report (memo.Randomizer.spend), the ledger's charge
(ledger.charge) and the spool's row (spool.append). The sender is woken when a batch may be
due. Errors are raised (an LdptelError, or a bug's exception): Reporter.report turns them
into a status."""

from __future__ import annotations

import time

from ldptel.client import ledger, spool
from ldptel.client.campaign import CampaignConfig
from ldptel.client.config_cache import ConfigCache
from ldptel.client.errors import DiskFullError, InvalidLevelError, ReporterClosedError
from ldptel.client.levels import LEVEL_NAME
from ldptel.client.sender import Sender
from ldptel.client.state import State
from ldptel.client.statedb import transaction
from ldptel.client.status import ReportStatus
from ldptel.client.values import value_of
from ldptel.client.windows import Windows


def check_level_name(level: object) -> str:
    if not isinstance(level, str) or not LEVEL_NAME.fullmatch(level):
        raise InvalidLevelError("level", "must be a privacy level name ([a-z0-9_-]{1,32})")
    return level


def level_of(config: CampaignConfig, level: object, default: str | None) -> str:
    """The level a report is made at ("" for a campaign without levels), checked by the
    campaign's level rule. The Reporter's own level (`default`) applies only to campaigns
    that declare levels; a level passed to report() applies to every campaign."""
    if level is not None:
        name = check_level_name(level)
    elif config.levels:
        name = default or ""
    else:
        return ""
    config.reporting_epsilon(name)  # raises InvalidLevelError
    return name


class Pipeline:
    """The steps of report() over one Reporter's parts."""

    def __init__(self, state: State, configs: ConfigCache, windows: Windows, sender: Sender):
        self._state = state
        self._configs = configs
        self._windows = windows
        self._sender = sender

    def report(
        self, campaign: str, value: object, level: str | None, default_level: str | None
    ) -> ReportStatus:
        """SPOOLED once the perturbed report is in the spool; RETIRED or LEVEL_NOT_COLLECTED
        when there is nothing to report; else raises why not."""
        if self._state.closed:
            raise ReporterClosedError("reporter", "closed; create a new Reporter")
        active = self._configs.get(campaign)
        if active is None:
            return ReportStatus.RETIRED
        randomized = value_of(active, value)
        name = level_of(active.config, level, default_level)
        if not self._sender.accepting():
            raise DiskFullError("state_dir", "disk full; reports resume once the spool is sent")
        now = time.time()
        config = active.config
        window = self._windows.charged(config)
        with self._state.lock:
            conn = self._state.live()
            state = self._configs.at_level(active, name, conn)
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
