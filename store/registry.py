"""The campaign registry in Redis (DESIGN.md, "Campaigns and configs"): the collector writes
it and validates against it, the aggregator reads it; one type for both.

`keys.config(id)` holds a config's canonical JSON forever (configs are immutable);
`keys.campaign(name)` says which config is active and whether the campaign is retired.
Every write touches one key at a time, in an order that a retry completes, so the registry
works unchanged on Redis Cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.errors import LdptelError
from ldptel.store import keys
from ldptel.store.connection import RedisClient, text

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


class CampaignRetiredError(Exception):
    """A retired campaign cannot get a new config."""


class Registry:
    """Campaigns and configs in Redis. Configs are immutable, so a config and its oracles are
    cached for the life of the process; a campaign's record (its active config, retired or
    not) is cached for `cache_seconds`, so a change reaches every collector worker within
    that time (the worker that made it sees it at once; `fresh=True` reads through).
    """

    def __init__(
        self,
        redis: RedisClient,
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
        self._configs: dict[str, CampaignConfig | None] = {}
        #: Stored configs that no longer load, by id: why (e.g. params that guarantee less
        #: than their epsilon), so their entries are quarantined with that reason.
        self.refused: dict[str, str] = {}
        self._oracles: dict[tuple[str, str], Mechanism | None] = {}

    # -- writes (admin) --------------------------------------------------------------------
    def create(self, config: CampaignConfig) -> tuple[str, bool]:
        """Store `config` as created (CampaignConfig.as_created: its fixed and derived
        parameters written out; its id computed now, once) and make it the campaign's active
        one.

        Returns (config_id, changed): changed is False if it already was the active config.
        Raises CampaignRetiredError for a retired campaign.
        """
        config = config.as_created()
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
        return self._remember(name, self.redis.hgetall(keys.campaign(name)), now)

    def _remember(self, name: str, record: dict[Any, Any], now: float) -> Campaign | None:
        campaign = None
        if record:
            campaign = Campaign(
                name=name,
                config_id=text(record[b"config_id"]),
                retired=record.get(b"retired") == b"1",
                created=int(record.get(b"created", b"0")),
            )
        self._campaigns[name] = (now + self.cache_seconds, campaign)
        return campaign

    def shard_counts(self, names: list[str]) -> dict[str, int]:
        """`shard_count` of every campaign of `names`, their records read fresh in one
        pipeline (an aggregation pass pays one round trip for all campaigns, not one each)."""
        now = self.clock()
        with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(keys.campaign(name))
            records = pipe.execute()
        counts = {}
        for name, record in zip(names, records, strict=True):
            campaign = self._remember(name, record, now)
            config = None if campaign is None else self.config(campaign.config_id)
            counts[name] = max(1, config.shards) if config is not None else 1
        return counts

    def config(self, config_id: str) -> CampaignConfig | None:
        """The config stored under `config_id`; None if unknown, invalid or not matching its
        id (a corrupt registry). A known config is cached for the life of the process; an
        unknown id is not (it may be created later)."""
        config = self._configs.get(config_id)
        if config is None:
            config = self._load(config_id)
            if config is not None:
                self._configs[config_id] = config
        return config

    def _load(self, config_id: str) -> CampaignConfig | None:
        raw = self.redis.get(keys.config(config_id))
        if raw is None:
            return None
        try:
            config = CampaignConfig.from_dict(json.loads(raw), stored=True)
        except LdptelError as error:
            self.refused[config_id] = str(error)
            return None
        except ValueError:
            return None
        # The id is the hash of the canonical JSON (or, for a config stored before ids hashed
        # RFC 8785 JSON, of its legacy form); a mismatch means the registry is corrupt.
        return config.identified_as(config_id)

    def oracle(self, config_id: str, level: str = "") -> Mechanism | None:
        """The oracle a config's reports at `level` are randomized with ("" = a config
        without levels), or None if the config is unknown or the level does not report
        (threshold strategy). Raises InvalidLevelError if the level breaks the config's
        level rule (CampaignConfig.reporting_epsilon)."""
        config = self.config(config_id)
        if config is None:
            return None
        key = (config_id, level)
        if key not in self._oracles:
            self._oracles[key] = config.level_mechanism(level)
        return self._oracles[key]

    def current_config(self, name: str, *, fresh: bool = True) -> CampaignConfig | None:
        """The campaign's active config (read through the cache; the campaign's record
        fresh unless told otherwise)."""
        campaign = self.campaign(name, fresh=fresh)
        return None if campaign is None else self.config(campaign.config_id)

    def names(self) -> list[str]:
        """All registered campaigns, sorted (retired ones too: their streams still drain)."""
        return sorted(text(name) for name in self.redis.smembers(keys.campaigns()))

    def shard_count(self, name: str, *config_ids: str) -> int:
        """How many stream shards to read: the most any of these configs (or the active one)
        declares, so a shard of an older config is never forgotten."""
        current = self.current_config(name)
        counts = [1] + ([current.shards] if current is not None else [])
        for config_id in config_ids:
            config = self.config(config_id)
            if config is not None:
                counts.append(config.shards)
        return max(counts)
