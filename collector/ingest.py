"""Ingestion: validate a client batch against its campaign's config and append it to one
stream shard together with its idempotency mark, atomically, in one round trip.

A stored entry holds only what ldptel.store.codec encodes (config id, window start, n, the
packed reports, privacy level). Its stream id is not Redis's arrival-time id but
`<window start ms>-<seq>`, so nothing stored reveals when within its window a batch arrived
(docs/collector.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import xxhash

from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.errors import InvalidLevelError, LdptelError
from ldptel.client.oracles.base import WireMechanism
from ldptel.collector.auth import RateLimit
from ldptel.collector.errors import ApiError, bad_request, unavailable
from ldptel.store import codec, keys
from ldptel.store.connection import RedisClient
from ldptel.store.group_commit import NodeGroups, Wait
from ldptel.store.registry import Registry

# Matched with fullmatch: `$` would also match before a trailing newline.
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
CONFIG_ID = re.compile(r"[0-9a-f]{16}")
LEVEL = re.compile(r"[a-z0-9_-]{0,32}")
NO_RATE_LIMIT = RateLimit(0, 1)
BATCH_FIELDS = frozenset({"campaign", "config_id", "reports", "level"})
#: Bytes of a batch's JSON text besides its reports: keys, campaign name (<= 64), config id,
#: level (<= 32), brackets and whitespace.
ENVELOPE_BYTES = 1024
#: Whitespace allowed around one report and each of its fields (pretty-printed JSON).
REPORT_SLACK_BYTES = 32
FIELD_SLACK_BYTES = 16

# KEYS[1] idempotency mark, KEYS[2] stream, KEYS[3] the token's rate counter, KEYS[4] the
# aggregator's checkpoint: all in the {campaign:shard} slot, so one round trip counts,
# deduplicates and stores (Redis Cluster-safe).
# ARGV: 1 n, 2 mark expiry (unix s), 3 window start (ms), 4 rate limit of this shard
# (0 = none), 5 counter expiry (s), 6 the batch's digest, 7... the entry's field/value pairs
# (ldptel.store.codec).
# Returns {0, n} stored, {1, n} a duplicate of a stored batch (its mark written again), {2,
# count} over the rate limit, {3, n} the key already marks a different batch (its digest
# differs).
# The mark is "<n>:<digest>"; a mark of an older collector ("<n>", no digest) matches any batch.
# Every request that reaches the script counts against the limit, retries included.
# The entry id is <window start ms>-0, or, when the stream's last id is already at or past
# that millisecond (earlier entries of this window, or a worker with a clock ahead),
# <last ms>-<last seq + 1>: ids stay strictly increasing and reveal only window and order.
# Redis 7 computes exactly that id for `<window start ms>-*` (after the stream's
# last-generated id, which survives trimming), and refuses it when the stream is already past
# that millisecond. Then, and on Redis 6.2, which has no `<ms>-*` ids, the id is computed
# here from XINFO STREAM, whose reply (it holds the first and last entries) costs Redis more
# than the rest of the script.
# If the stream key was lost (deleted, or evicted by a misconfigured Redis) its ids would
# restart below the checkpoint and the aggregator would never read the new entries: the
# checkpoint is a floor for the last id too.
_INGEST = """
if tonumber(ARGV[4]) > 0 then
  local count = redis.call('INCR', KEYS[3])
  if count == 1 then redis.call('EXPIRE', KEYS[3], ARGV[5]) end
  if count > tonumber(ARGV[4]) then return {2, count} end
end
local seen = redis.call('GET', KEYS[1])
if seen then
  local colon = string.find(seen, ':', 1, true)
  if colon and string.sub(seen, colon + 1) ~= ARGV[6] then
    return {3, string.sub(seen, 1, colon - 1)}
  end
  -- Written again (same value and expiry) so that a WAIT after this script covers the
  -- batch: WAIT counts the writes of its own connection, and another one stored the batch.
  redis.call('SET', KEYS[1], seen, 'KEEPTTL')
  return {1, colon and string.sub(seen, 1, colon - 1) or seen}
end
local function split(stream_id)
  local dash = string.find(stream_id, '-', 1, true)
  return tonumber(string.sub(stream_id, 1, dash - 1)), tonumber(string.sub(stream_id, dash + 1))
end
local function stored()
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[6], 'EXAT', ARGV[2])
  return {0, ARGV[1]}
end
local checkpoint = redis.call('GET', KEYS[4])
if not checkpoint or split(checkpoint) < tonumber(ARGV[3]) then
  local added = redis.pcall('XADD', KEYS[2], ARGV[3] .. '-*', unpack(ARGV, 7))
  if type(added) ~= 'table' or not added.err then return stored() end
end
local last_ms, last_seq = 0, 0
if redis.call('EXISTS', KEYS[2]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[2])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      last_ms, last_seq = split(info[i + 1])
      break
    end
  end
end
if checkpoint then
  local ms, seq = split(checkpoint)
  if ms > last_ms or (ms == last_ms and seq > last_seq) then last_ms, last_seq = ms, seq end
end
local id
if tonumber(ARGV[3]) > last_ms then
  id = ARGV[3] .. '-0'
else
  id = string.format('%d-%d', last_ms, last_seq + 1)
end
redis.call('XADD', KEYS[2], id, unpack(ARGV, 7))
return stored()
"""


def shard_of(idempotency_key: str, shards: int) -> int:
    """The stream shard of a batch: a stable hash of its idempotency key, so a retry lands
    on the shard that holds its mark."""
    return int(xxhash.xxh64_intdigest(idempotency_key.encode("ascii")) % shards)


def check_idempotency_key(value: str | None) -> str:
    if value is None:
        raise bad_request("Idempotency-Key", "header is required (a random key per batch)")
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise bad_request("Idempotency-Key", "must be 1-128 characters of [A-Za-z0-9_-]")
    return value


@dataclass(frozen=True)
class Batch:
    """The envelope of a client batch, checked; `reports` are still untrusted."""

    campaign: str
    config_id: str
    reports: list[Any]
    level: str


def parse_batch(data: object, max_reports: int) -> Batch:
    """Check the envelope `{campaign, config_id, reports, level?}`; 400/413 on bad input."""
    if not isinstance(data, dict):
        raise bad_request("body", "must be a JSON object")
    unknown = sorted(set(data) - BATCH_FIELDS)
    if unknown:
        raise bad_request(unknown[0], "unknown field")
    campaign = data.get("campaign")
    if not isinstance(campaign, str) or not NAME_PATTERN.fullmatch(campaign):
        raise bad_request("campaign", "must be a campaign name ([a-z0-9][a-z0-9_-]{0,63})")
    config_id = data.get("config_id")
    if not isinstance(config_id, str) or not CONFIG_ID.fullmatch(config_id):
        raise bad_request("config_id", "must be 16 lowercase hex digits")
    reports = data.get("reports")
    if not isinstance(reports, list):
        raise bad_request("reports", "must be a list")
    if not reports:
        raise bad_request("reports", "must hold at least one report")
    if len(reports) > max_reports:
        raise ApiError(
            413, "reports", f"at most {max_reports} reports per batch", code="too_many_reports"
        )
    level = data.get("level", "")
    if not isinstance(level, str) or not LEVEL.fullmatch(level):
        raise bad_request("level", "must be a privacy level name")
    return Batch(campaign, config_id, reports, level)


def level_oracle(registry: Registry, config: CampaignConfig, level: str) -> WireMechanism:
    """The oracle that validates a batch at `level`, by the config's level rule
    (docs/personalized-privacy.md): 400 for a missing or forbidden level, 409 for a level
    the config does not define or that does not report."""
    try:
        oracle = registry.oracle(config.config_id, level)
    except InvalidLevelError as error:
        if error.kind != "unknown":
            raise bad_request("level", error.reason) from error
        raise ApiError(
            409, "level", "unknown privacy level for this config", code="unknown_level"
        ) from error
    if oracle is None:
        raise ApiError(
            409,
            "level",
            "this level does not report (level_strategy threshold)",
            code="unknown_level",
        )
    return oracle


@dataclass(frozen=True)
class ReportForm:
    """What a valid wire report of one oracle looks like: its keys, and the length of its
    longest compact JSON text (every field at its widest value)."""

    keys: frozenset[str]
    max_chars: int

    @classmethod
    def of(cls, oracle: WireMechanism) -> ReportForm:
        reports = oracle.widest_reports()
        keys = frozenset(key for report in reports for key in report)
        return cls(keys, max(len(json.dumps(r, separators=(",", ":"))) for r in reports))

    def text_bytes(self, max_reports: int) -> int:
        """The most bytes `max_reports` such reports take in a batch's JSON text, whitespace
        of pretty-printing included."""
        per_report = self.max_chars + 1 + REPORT_SLACK_BYTES + FIELD_SLACK_BYTES * len(self.keys)
        return max_reports * per_report

    def check(self, reports: list[Any]) -> None:
        """Unknown fields inside a report are refused like unknown batch fields (400)."""
        try:  # one C pass when no report has an unknown field (the loop names the first)
            if all(map(self.keys.issuperset, reports)):
                return
        except TypeError:  # a report that is not an object and holds unhashable values
            pass
        for i, report in enumerate(reports):
            if isinstance(report, dict) and not report.keys() <= self.keys:
                unknown = sorted(report.keys() - self.keys)[0]
                raise bad_request(f"reports[{i}].{unknown}", "unknown field", "invalid_report")


def batch_digest(entry: codec.StreamEntry) -> str:
    """What an idempotency key is bound to: the batch's config, level and validated reports
    (not its bytes, which differ with JSON formatting and gzip headers between retries)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{entry.config_id}:{entry.level}:{entry.n}:".encode())
    digest.update(entry.packed)
    return digest.hexdigest()


@dataclass(frozen=True)
class ValidBatch:
    """A batch whose every report its campaign's active config validated, packed."""

    campaign: str
    config: CampaignConfig
    n: int
    packed: bytes
    level: str


@dataclass(frozen=True)
class Stored:
    accepted: int
    duplicate: bool


class Ingestor:
    """Validates batches against the registry and stores them, counting the rate limit."""

    def __init__(
        self,
        redis: RedisClient,
        registry: Registry,
        *,
        idempotency_seconds: int,
        rate_limit: RateLimit = NO_RATE_LIMIT,
        wait_replicas: int = 0,
        wait_timeout_seconds: float = 1.0,
        retry_after_seconds: int = 1,
    ) -> None:
        self.redis = redis
        self.registry = registry
        self.idempotency_seconds = idempotency_seconds
        self.rate_limit = rate_limit
        self.wait_replicas = wait_replicas
        self.retry_after_seconds = retry_after_seconds
        self._ingest = redis.register_script(_INGEST)
        # Concurrent requests share their round trips to each master (store/group_commit.py).
        wait = Wait(wait_replicas, max(1, round(wait_timeout_seconds * 1000)))
        self._groups = NodeGroups(redis, self._ingest, wait)
        self._forms: dict[tuple[str, str], ReportForm] = {}
        self._text_limits: dict[tuple[str, int], int] = {}
        self._largest: tuple[float, int] = (0.0, 0)

    def report_form(self, config_id: str, level: str, oracle: WireMechanism) -> ReportForm:
        """The report form of a config at a level (configs are immutable: cached for good)."""
        key = (config_id, level)
        if key not in self._forms:
            self._forms[key] = ReportForm.of(oracle)
        return self._forms[key]

    def largest_text_limit(self, max_reports: int, cache_seconds: float = 1.0) -> int:
        """The largest `text_limit` of any campaign that takes batches: the cap of a batch
        text until the campaign it names is known (recomputed at most every
        `cache_seconds`)."""
        now = time.monotonic()
        expires, largest = self._largest
        if now >= expires:
            largest = ENVELOPE_BYTES
            for name in self.registry.names():
                try:
                    largest = max(largest, self.text_limit(name, max_reports))
                except ApiError:  # retired, or a registry entry without its config
                    continue
            self._largest = (now + cache_seconds, largest)
        return largest

    def text_limit(self, name: str, max_reports: int) -> int:
        """The most bytes a valid batch of campaign `name` can take as JSON text: its widest
        report at any of its levels, `max_reports` times, plus the envelope. 404/409 for a
        campaign that takes no batch."""
        campaign = self.registry.campaign(name)
        if campaign is None:
            raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
        if campaign.retired:
            raise ApiError(409, "campaign", "retired campaign", code="retired_campaign")
        key = (campaign.config_id, max_reports)
        limit = self._text_limits.get(key)  # configs are immutable: cached for good
        if limit is None:
            config = self.registry.config(campaign.config_id)
            if config is None:
                raise ApiError(409, "config_id", "unknown config", code="unknown_config")
            widest = 0
            for level in sorted(config.levels) or [""]:
                oracle = self.registry.oracle(config.config_id, level)
                if oracle is not None:
                    form = self.report_form(config.config_id, level, oracle)
                    widest = max(widest, form.text_bytes(max_reports))
            limit = self._text_limits[key] = ENVELOPE_BYTES + widest
        return limit

    def active_config(self, batch: Batch) -> CampaignConfig:
        """The config the batch is stamped with, if it is its campaign's active one."""
        campaign = self.registry.campaign(batch.campaign)
        if campaign is not None and campaign.config_id != batch.config_id:
            # The cache may predate a config change made on another worker.
            campaign = self.registry.campaign(batch.campaign, fresh=True)
        if campaign is None:
            raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
        if campaign.retired:
            raise ApiError(409, "campaign", "retired campaign", code="retired_campaign")
        if campaign.config_id != batch.config_id:
            known = self.registry.config(batch.config_id)
            if known is not None and known.name == batch.campaign:
                raise ApiError(409, "config_id", "retired config", code="retired_config")
            raise ApiError(409, "config_id", "unknown config", code="unknown_config")
        active = self.registry.config(batch.config_id)
        if active is None:  # a registry written by hand, without its config
            raise ApiError(409, "config_id", "unknown config", code="unknown_config")
        return active

    def validate(self, batch: Batch) -> ValidBatch:
        """Check the batch against its campaign's active config and validate every report
        with the oracle; 404/409 for a campaign or config that takes no batch, 400 on a bad
        report."""
        config = self.active_config(batch)
        oracle = level_oracle(self.registry, config, batch.level)
        self.report_form(batch.config_id, batch.level, oracle).check(batch.reports)
        try:
            packed = oracle.pack(oracle.decode(batch.reports))
        except LdptelError as error:
            raise bad_request(error.field, error.reason, code="invalid_report") from error
        except (TypeError, ValueError, OverflowError, KeyError, IndexError) as error:
            # An oracle's decoder should raise ReportError; never let odd input become a 500.
            raise bad_request("reports", "malformed report", code="invalid_report") from error
        return ValidBatch(batch.campaign, config, len(batch.reports), packed, batch.level)

    def append(
        self, batch: ValidBatch, idempotency_key: str, token_hash: str, *, now: float | None = None
    ) -> Stored:
        """Count the token's request and append the batch, once (the ingest script); 429 over
        the rate limit, 422 for a key already used for a different batch."""
        config = batch.config
        now = time.time() if now is None else now
        window = config.window_of(now)
        shard = shard_of(idempotency_key, config.shards)
        expires = window + config.window_seconds + self.idempotency_seconds
        entry = codec.StreamEntry(config.config_id, window, batch.n, batch.packed, batch.level)
        limit = self.rate_limit
        script_keys = [
            keys.idempotency(batch.campaign, shard, idempotency_key),
            keys.stream(batch.campaign, shard),
            keys.rate(batch.campaign, shard, token_hash, limit.window(now)),
            keys.checkpoint(batch.campaign, shard),
        ]
        script_args = [
            batch.n, expires, window * 1000,
            limit.per_shard(config.shards) if limit.limit else 0, limit.seconds + 1,
            batch_digest(entry), *codec.flat(entry),
        ]  # fmt: skip
        reply, acknowledged = self._run(script_keys, script_args)
        outcome, count = int(reply[0]), int(reply[1])
        if outcome in (0, 1) and acknowledged < self.wait_replicas:
            # Stored now, or before (the script rewrites a duplicate's mark), but not yet on
            # the replicas: the client's retry under its key is a duplicate.
            raise unavailable(
                self.retry_after_seconds,
                f"not yet copied to {self.wait_replicas} replica(s), retry later",
                code="replication_timeout",
            )
        if outcome == 2:
            raise limit.exceeded(now)
        if outcome == 3:
            raise ApiError(
                422,
                "Idempotency-Key",
                "already used for a different batch; send each batch under a fresh key",
                code="idempotency_key_reused",
            )
        return Stored(accepted=int(count), duplicate=bool(outcome))

    def store(
        self, batch: Batch, idempotency_key: str, token_hash: str, *, now: float | None = None
    ) -> Stored:
        """validate, then append."""
        return self.append(self.validate(batch), idempotency_key, token_hash, now=now)

    def _run(self, script_keys: list[str], script_args: list[Any]) -> tuple[list[Any], int]:
        """The ingest script's reply, and how many replicas have the batch (WAIT, when
        `wait_replicas` asks), in a round trip shared with the requests in flight."""
        reply = self._groups.run(script_keys, script_args)
        return reply.value, reply.acknowledged
