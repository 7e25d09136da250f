"""The campaign registry in Redis (DESIGN.md, "Campaigns and configs").

`keys.config(id)` holds a config's canonical JSON forever (configs are immutable);
`keys.campaign(name)` says which config is active and whether the campaign is retired.
Every write touches one key at a time, in an order that a retry completes, so the registry
works unchanged on Redis Cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import FrequencyOracle
from ldptel.collector import keys

# One key only: compare the active config and switch it atomically.
_ACTIVATE = """
local state = redis.call('HMGET', KEYS[1], 'config_id', 'retired')
if state[2] == '1' then return 'retired' end
if state[1] == ARGV[1] then return 'same' end
redis.call('HSET', KEYS[1], 'config_id', ARGV[1], 'retired', '0')
redis.call('HSETNX', KEYS[1], 'created', ARGV[2])
return 'new'
"""

_RETIRE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'retired', '1')
return 1
"""


@dataclass(frozen=True)
class Campaign:
    """A campaign's registry record."""

    name: str
    config_id: str
    retired: bool
    created: int


@dataclass(frozen=True)
class ActiveConfig:
    """A config with its oracle, built once per worker (configs never change)."""

    config_id: str
    config: CampaignConfig
    oracle: FrequencyOracle
    #: Per privacy level, the oracle its reports use (None: the level does not report).
    levels: Mapping[str, FrequencyOracle | None] = field(default_factory=dict)


class CampaignRetiredError(Exception):
    """A retired campaign cannot get a new config."""


class Registry:
    """Campaigns and configs in Redis, with a short per-process cache for the ingest path.

    The cache means a new active config or a retirement reaches every worker within
    `cache_seconds`; the worker that made the change sees it at once.
    """

    def __init__(
        self,
        redis: Any,
        *,
        cache_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._activate = redis.register_script(_ACTIVATE)
        self._retire = redis.register_script(_RETIRE)
        self._campaigns: dict[str, tuple[float, Campaign | None]] = {}
        self._configs: dict[str, ActiveConfig] = {}

    # -- writes (admin) --------------------------------------------------------------------
    def create(self, config: CampaignConfig) -> tuple[str, bool]:
        """Store `config`, its oracle's fixed parameters written out, and make it the
        campaign's active one.

        Returns (config_id, changed): changed is False if it already was the active config.
        Raises CampaignRetiredError for a retired campaign.
        """
        config = config.with_fixed_params()
        config_id = config.config_id
        self.redis.set(keys.config(config_id), config.canonical_json(), nx=True)
        outcome = self._activate(
            keys=[keys.campaign(config.name)], args=[config_id, int(time.time())]
        )
        if outcome == b"retired":
            raise CampaignRetiredError(config.name)
        self.redis.sadd(keys.campaigns(), config.name)
        self._campaigns.pop(config.name, None)
        return config_id, outcome == b"new"

    def retire(self, name: str) -> bool:
        """Retire a campaign: all its reports are rejected from now on. False if unknown."""
        found = bool(self._retire(keys=[keys.campaign(name)]))
        self._campaigns.pop(name, None)
        return found

    # -- reads -----------------------------------------------------------------------------
    def campaign(self, name: str, *, fresh: bool = False) -> Campaign | None:
        """The campaign's record (from the cache unless `fresh` or older than the TTL)."""
        now = self.clock()
        cached = self._campaigns.get(name)
        if not fresh and cached is not None and cached[0] > now:
            return cached[1]
        record = self.redis.hgetall(keys.campaign(name))
        campaign = None
        if record:
            campaign = Campaign(
                name=name,
                config_id=record[b"config_id"].decode(),
                retired=record.get(b"retired") == b"1",
                created=int(record.get(b"created", b"0")),
            )
        self._campaigns[name] = (now + self.cache_seconds, campaign)
        return campaign

    def config(self, config_id: str) -> ActiveConfig | None:
        """A stored config by id, with its oracle; cached for the life of the process."""
        if config_id in self._configs:
            return self._configs[config_id]
        raw = self.redis.get(keys.config(config_id))
        if raw is None:  # not cached: the id may be created later
            return None
        config = CampaignConfig.from_dict(json.loads(raw))
        levels = {level: config.level_oracle(level) for level in config.levels}
        active = ActiveConfig(config_id, config, config.build_oracle(), levels)
        self._configs[config_id] = active
        return active

    def names(self) -> list[str]:
        return sorted(name.decode() for name in self.redis.smembers(keys.campaigns()))
