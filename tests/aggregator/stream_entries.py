"""Test helpers: a campaign registry and stream entries written exactly as the collector
writes them (ldptel.store.keys names, ldptel.store.codec fields)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ldptel.client.campaign import CampaignConfig
from ldptel.client.oracles import ReportBatch
from ldptel.store import codec, keys


def make_config(name: str = "screens", **overrides: Any) -> CampaignConfig:
    data: dict[str, Any] = {
        "name": name,
        "oracle": "de",
        "epsilon": 1.0,
        "domain": [f"item{i}" for i in range(8)],
    }
    data.update(overrides)
    if "range" in data:  # a numeric campaign has no domain
        del data["domain"]
    return CampaignConfig.from_dict(data)


def register(client: Any, config: CampaignConfig) -> str:
    """Store a campaign and its config as the collector's registry does."""
    client.set(keys.config(config.config_id), config.canonical_json())
    client.hset(
        keys.campaign(config.name),
        mapping={"config_id": config.config_id, "retired": 0, "created": int(time.time())},
    )
    client.sadd(keys.campaigns(), config.name)
    return config.config_id


def append(
    client: Any,
    config: CampaignConfig,
    batch: ReportBatch,
    *,
    window: int,
    shard: int = 0,
    level: str = "",
) -> bytes:
    """Append one validated client batch as one stream entry."""
    oracle = config.build_mechanism()
    n = len(next(iter(batch.values())))
    entry = codec.StreamEntry(config.config_id, window, n, oracle.pack(batch), level)
    return bytes(client.xadd(keys.stream(config.name, shard), codec.encode(entry)))


def simulate(
    client: Any,
    config: CampaignConfig,
    values: np.ndarray,
    *,
    window: int,
    batch_size: int = 100,
    seed: int = 0,
    shards: int | None = None,
) -> None:
    """Perturb `values` with the config's oracle and append them in batches, round-robin
    over the shards."""
    oracle = config.build_mechanism()
    rng = np.random.default_rng(seed)
    shards = config.shards if shards is None else shards
    for number, start in enumerate(range(0, len(values), batch_size)):
        batch = oracle.perturb_batch(values[start : start + batch_size], rng)
        append(client, config, batch, window=window, shard=number % shards)


def dump_states(client: Any) -> dict[bytes, dict[bytes, bytes]]:
    """Every window state hash in the database (for bit-for-bit comparisons)."""
    return {
        key: client.hgetall(key)
        for key in sorted(client.scan_iter(match=f"{keys.PREFIX}:*:state:*", count=1000))
    }


def with_db(url: str, db: int) -> str:
    """The same Redis URL pointing at database `db`."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


def old_and_recent_entries(
    client: Any, config: CampaignConfig, offsets_ms: list[int], window: int = 1_700_006_400
) -> list[bytes]:
    """One-report entries of `window` whose ids are `offsets_ms` before the Redis clock's
    now (on shard 0)."""
    seconds, _ = client.time()
    now_ms = int(seconds) * 1000
    payload = config.build_oracle().pack({"y": np.zeros(1, dtype=np.uint32)})
    fields = {"c": config.config_id, "w": window, "n": 1, "p": payload, "l": ""}
    stream = keys.stream(config.name, 0)
    return [client.xadd(stream, fields, id=f"{now_ms - offset}-0") for offset in offsets_ms]
