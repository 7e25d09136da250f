"""A shard lease: one worker at a time reads a shard (a Redis string with a TTL).

The lease saves duplicate work; exactly-once does not rest on it: every apply WATCHes the
checkpoint, so a worker whose lease lapsed cannot commit over a newer owner's progress.
"""

from __future__ import annotations

import time
import uuid

from ldptel.store.connection import RedisClient

# Take the lease if it is free, already ours, or held by an earlier process with our worker
# id (a restarted worker takes its shards back at once instead of waiting out the TTL).
_ACQUIRE = """
local current = redis.call('GET', KEYS[1])
if (not current) or current == ARGV[1] or string.sub(current, 1, #ARGV[2]) == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Lease:
    """Ownership of one shard (or of building one window's report) by one worker process,
    renewed while it works."""

    def __init__(self, client: RedisClient, key: str, worker_id: str, ttl_ms: int = 30_000) -> None:
        self.client = client
        self.key = key
        self.prefix = f"{worker_id}/"
        self.token = f"{self.prefix}{uuid.uuid4().hex}"
        self.ttl_ms = ttl_ms
        self._renewed_at: float | None = None

    @property
    def held(self) -> bool:
        return self._renewed_at is not None

    def acquire(self) -> bool:
        """Take the lease if no other worker holds it."""
        taken = self.client.eval(_ACQUIRE, 1, self.key, self.token, self.prefix, self.ttl_ms)
        self._renewed_at = time.monotonic() if taken else None
        return bool(taken)

    def keep(self) -> bool:
        """Renew the lease once a third of its TTL has passed; False if it was lost."""
        if self._renewed_at is None:
            return False
        if (time.monotonic() - self._renewed_at) * 1000 < self.ttl_ms / 3:
            return True
        if self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms):
            self._renewed_at = time.monotonic()
            return True
        self._renewed_at = None
        return False

    def release(self) -> None:
        """Give the lease back (only if still ours)."""
        if self._renewed_at is not None:
            self.client.eval(_RELEASE, 1, self.key, self.token)
            self._renewed_at = None
