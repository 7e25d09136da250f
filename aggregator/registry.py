"""The campaign registry as the aggregator reads it (written by the collector).

Configs are immutable, so a config id -> config (and its oracle) is cached for the life of
the process; only the campaign list and each campaign's current config id are re-read.
"""

from __future__ import annotations

import json
from typing import Any

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import LdptelError
from ldptel.client.oracles import FrequencyOracle
from ldptel.collector import keys


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Registry:
    """Read-only view of campaigns and configs in Redis, with a cache of immutable configs."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._configs: dict[str, CampaignConfig | None] = {}
        self._oracles: dict[tuple[str, str], FrequencyOracle | None] = {}

    def campaign_names(self) -> list[str]:
        """All registered campaigns, sorted (retired ones too: their streams still drain)."""
        return sorted(_text(name) for name in self.client.smembers(keys.campaigns()))

    def current_config_id(self, name: str) -> str | None:
        value = self.client.hget(keys.campaign(name), "config_id")
        return None if value is None else _text(value)

    def current_config(self, name: str) -> CampaignConfig | None:
        """The campaign's current config, or None if the campaign or its config is missing."""
        config_id = self.current_config_id(name)
        return None if config_id is None else self.config(config_id)

    def config(self, config_id: str) -> CampaignConfig | None:
        """The config stored under `config_id`; None if unknown, invalid or not matching its id."""
        if config_id not in self._configs:
            self._configs[config_id] = self._load(config_id)
        return self._configs[config_id]

    def _load(self, config_id: str) -> CampaignConfig | None:
        raw = self.client.get(keys.config(config_id))
        if raw is None:
            return None
        try:
            config = CampaignConfig.from_dict(json.loads(raw))
        except (ValueError, LdptelError):
            return None
        # The id is the hash of the canonical JSON; a mismatch means the registry is corrupt.
        return config if config.config_id == config_id else None

    def oracle(self, config_id: str, level: str = "") -> FrequencyOracle | None:
        """The oracle a config's reports at a privacy level were randomized with ("" = the
        config's own oracle); None if the config is unknown, does not define that level, or
        the level does not report (threshold strategy). Entries with no oracle are
        quarantined: a level is never estimated with the wrong epsilon."""
        config = self.config(config_id)
        # Without levels only "" is defined; with levels, "" is not.
        if config is None or level not in (config.levels or {"": config.epsilon}):
            return None
        key = (config_id, level)
        if key not in self._oracles:
            self._oracles[key] = config.level_oracle(level)
        return self._oracles[key]

    def shard_count(self, name: str, *config_ids: str) -> int:
        """How many stream shards to read: the most any of these configs (or the current one)
        declares, so a shard of an older config is never forgotten."""
        counts = [1]
        for config_id in (*config_ids, self.current_config_id(name)):
            config = self.config(config_id) if config_id else None
            if config is not None:
                counts.append(config.shards)
        return max(counts)
