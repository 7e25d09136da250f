"""Window state: per (campaign, config, window, level, shard) a Redis hash holding `n` and the
support vector, one field per item index with a nonzero count.

Support vectors of batches add, so a delta is applied with HINCRBY (exact 64-bit integers);
shards merge by adding their vectors when a report is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from redis.client import Pipeline

from ldptel.store import keys
from ldptel.store.connection import RedisClient

# One EVAL per state instead of one HINCRBY command per item: Python builds one command, and
# the script text (not EVALSHA) keeps it safe inside MULTI, where a NOSCRIPT error would not
# abort the rest of the transaction.
ADD_SCRIPT = """
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 0
"""


@dataclass(frozen=True, order=True)
class StateKey:
    """What one window state counts: reports of one config, window and privacy level."""

    window: int
    config_id: str
    level: str = ""

    @property
    def member(self) -> str:
        """Its member in the shard's state index."""
        return f"{self.config_id}:{self.window}:{self.level}"

    @classmethod
    def from_member(cls, member: bytes | str) -> StateKey:
        text = member.decode() if isinstance(member, bytes) else member
        config_id, window, level = text.split(":", 2)
        return cls(window=int(window), config_id=config_id, level=level)

    def redis_key(self, name: str, shard: int) -> str:
        return keys.window_state(name, shard, self.config_id, self.window, self.level)


def add_delta(
    pipe: Pipeline, name: str, shard: int, state: StateKey, n: int, support: NDArray[np.int64]
) -> None:
    """Queue (inside MULTI) the addition of n reports and their support to a shard's state."""
    nonzero = np.flatnonzero(support)
    args: list[int | str] = ["n", n]
    for index, count in zip(nonzero.tolist(), support[nonzero].tolist(), strict=True):
        args += [index, count]
    pipe.eval(ADD_SCRIPT, 1, state.redis_key(name, shard), *args)
    pipe.zadd(keys.state_index(name, shard), {state.member: state.window})
    pipe.hincrby(keys.pending_reports(name, shard), state.member, 1)


def read_state(
    client: RedisClient, name: str, shards: Iterable[int], state: StateKey, size: int
) -> tuple[int, NDArray[np.int64]]:
    """n and the support vector of `state`, summed over `shards`."""
    shards = list(shards)
    with client.pipeline(transaction=False) as pipe:
        for shard in shards:
            pipe.hgetall(state.redis_key(name, shard))
        hashes = pipe.execute()
    n = 0
    support = np.zeros(size, dtype=np.int64)
    for fields in hashes:
        for field, value in fields.items():
            if field == b"n":
                n += int(value)
            else:
                support[int(field)] += int(value)
    return n, support


def list_states(
    client: RedisClient, name: str, shards: Iterable[int], window: int | None = None
) -> list[StateKey]:
    """The states found in the shards' indexes (of one window, or all), sorted."""
    low, high = ("-inf", "+inf") if window is None else (window, window)
    with client.pipeline(transaction=False) as pipe:
        for shard in shards:
            pipe.zrangebyscore(keys.state_index(name, shard), low, high)
        members = pipe.execute()
    return sorted({StateKey.from_member(m) for shard_members in members for m in shard_members})


# Forget a pending state only if no delta was applied since its version was read.
_DONE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def pending_states(
    client: RedisClient, name: str, shards: Iterable[int]
) -> dict[int, dict[str, bytes]]:
    """Per shard: state member -> version of the states whose report is out of date."""
    shards = list(shards)
    with client.pipeline(transaction=False) as pipe:
        for shard in shards:
            pipe.hgetall(keys.pending_reports(name, shard))
        found = pipe.execute()
    return {
        shard: {member.decode(): version for member, version in fields.items()}
        for shard, fields in zip(shards, found, strict=True)
    }


def reported(
    client: RedisClient, name: str, pending: dict[int, dict[str, bytes]], window: int
) -> None:
    """Mark the pending states of `window` (as read before its report was built) reported."""
    for shard, members in pending.items():
        for member, version in members.items():
            if StateKey.from_member(member).window == window:
                client.eval(_DONE, 1, keys.pending_reports(name, shard), member, version)
