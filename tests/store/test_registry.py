"""The registry keeps every stored config under the id it was created with: configs stored
before ids hashed RFC 8785 JSON load under their legacy ids (docs/protocol.md, "Config ids")."""

from __future__ import annotations

import math
from typing import Any

from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys
from ldptel.store.registry import Registry

OLD = {"name": "old", "oracle": "olh", "epsilon": 1.0, "domain": ["a", "", "b"]}


def test_a_config_stored_under_its_legacy_id_loads_under_it(redis_client: Any) -> None:
    # As an older collector stored it: legacy JSON under the legacy id (g derived, not
    # written; an empty label, allowed then).
    config = CampaignConfig.from_dict(OLD, stored=True)
    legacy_id = config.legacy_config_id
    redis_client.set(keys.config(legacy_id), config.legacy_json())
    redis_client.hset(keys.campaign("old"), mapping={"config_id": legacy_id, "retired": "0"})
    registry = Registry(redis_client)
    loaded = registry.config(legacy_id)
    assert loaded is not None and loaded.config_id == legacy_id
    assert registry.current_config("old") == loaded
    oracle = registry.oracle(legacy_id)
    assert oracle is not None and oracle.g == 4  # type: ignore[attr-defined]  # round(e + 1)
    # The same JSON under any other id is a corrupt registry.
    redis_client.set(keys.config("0123456789abcdef"), config.legacy_json())
    assert registry.config("0123456789abcdef") is None


def test_a_created_config_is_stored_as_created_under_its_rfc_8785_id(redis_client: Any) -> None:
    registry = Registry(redis_client)
    config_id, changed = registry.create(CampaignConfig.from_dict({**OLD, "domain": ["a", "b"]}))
    stored = redis_client.get(keys.config(config_id)).decode()
    # g = round(e + 1) and p = 1/(1 + (g - 1) e^-1), written out at creation
    assert changed and '"epsilon":1,' in stored
    assert f'"params":{{"g":4,"p":{1 / (1 + 3 * math.exp(-1.0))!r}}}' in stored
    loaded = registry.config(config_id)
    assert loaded is not None and loaded.config_id == config_id and not loaded.legacy_id
