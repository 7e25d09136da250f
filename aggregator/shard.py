"""One aggregation step on one shard: read entries after the checkpoint, count their support,
and apply the support deltas, the quarantined entries and the new checkpoint in one
MULTI/EXEC guarded by WATCH on the checkpoint and the lease.

A crash before EXEC applies nothing and the next step re-reads from the same checkpoint; a
step that raced another worker fails its EXEC (WatchError) and applies nothing either. So
every entry is counted exactly once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import redis
from numpy.typing import NDArray
from redis.client import Pipeline
from redis.typing import EncodableT, FieldT, StreamRangeResponse

from ldptel.aggregator.state import StateKey, add_delta, append_log, read_packed, rewrites
from ldptel.client.campaign import Mechanism
from ldptel.client.errors import InvalidLevelError, LdptelError
from ldptel.client.oracles import ReportBatch
from ldptel.client.oracles.base import ReportLog, ReportMechanism
from ldptel.store import codec, keys
from ldptel.store.codec import CorruptEntryError, Quarantine
from ldptel.store.connection import (
    SLOT_MOVED_ERRORS,
    RedisClient,
    node_client,
    refresh_slots,
    text,
)
from ldptel.store.registry import Registry

#: Support is counted on at most this many (report x support item) cells at once, so the
#: oracle's temporaries stay bounded (memory flat in n) whatever the read size.
CELL_BUDGET = 1 << 24
#: Payload bytes read per step at most (about: estimated from the entries read so far), so a
#: step over large reports (OUE at big d) holds a bounded amount whatever --batch-entries says.
READ_BUDGET = 32 << 20
#: Quarantined entries kept for inspection (approximate cap; XADD MAXLEN ~).
QUARANTINE_MAXLEN = 100_000
PRUNED_REASON = "its window's state was pruned (ldptel aggregator prune)"
#: The entries of a step set aside, by id: why (the quarantine code) and the reason in words.
Rejected = dict[bytes, tuple[Quarantine, str]]


@dataclass
class Parsed:
    """A decoded stream entry."""

    state: StateKey
    oracle: Mechanism
    n: int
    batch: ReportBatch


@dataclass
class Delta:
    """What a step adds to one state: a support vector (`packed`: the state's packed vector
    as read, for a delta that rewrites it; state.rewrites), or the records appended to its
    report log (`log`, for a ReportLog mechanism)."""

    state: StateKey
    n: int
    support: NDArray[np.int64] | None = None
    packed: NDArray[np.int64] | None = None
    log: bytes | None = None


@dataclass
class StepResult:
    """What one step did."""

    entries: int = 0
    reports: int = 0
    quarantined: int = 0
    touched: set[StateKey] = field(default_factory=set)
    #: True when the step reached the end of the stream (nothing more to read now).
    caught_up: bool = False
    #: True when the step did not commit because another worker owns the shard now.
    lost: bool = False


def stream_entries(reply: StreamRangeResponse | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """XRANGE's reply as typed (id, fields) pairs. redis-py types replies as bytes | str and an
    entry as possibly None (XCLAIM of a deleted entry; XRANGE never returns one); the store's
    clients never set decode_responses, so ids and fields are bytes. Checked, not copied: a
    copy cost 4.5 ms of CPU per 1000 entries, a quarter of a DE pass at d = 1024."""
    entries = reply or []
    for entry_id, fields in entries:
        if not isinstance(entry_id, bytes) or fields is None:
            raise TypeError(f"XRANGE entry {entry_id!r}: expected bytes and fields")
    return cast(list[tuple[bytes, dict[bytes, bytes]]], entries)


def parse_entry(registry: Registry, name: str, fields: dict[bytes, bytes]) -> Parsed:
    """Decode one stream entry (ldptel.store.codec) and check it against the registry;
    raises CorruptEntryError."""
    entry = codec.decode(fields)
    config = registry.config(entry.config_id)
    if config is None and entry.config_id in registry.refused:
        reason = registry.refused[entry.config_id]
        raise CorruptEntryError(Quarantine.CONFIG_REFUSED, f"config refused: {reason}")
    if config is None:
        raise CorruptEntryError(Quarantine.UNKNOWN_CONFIG, f"unknown config id {entry.config_id!r}")
    if config.name != name:
        raise CorruptEntryError(
            Quarantine.OTHER_CAMPAIGN,
            f"config {entry.config_id} belongs to campaign {config.name!r}",
        )
    if entry.window % config.window_seconds:
        raise CorruptEntryError(
            Quarantine.WINDOW_MISALIGNED,
            f"window {entry.window} is not a multiple of {config.window_seconds} s",
        )
    try:
        oracle = registry.oracle(entry.config_id, entry.level)
    except InvalidLevelError:
        oracle = None
    if oracle is None:
        raise CorruptEntryError(
            Quarantine.UNKNOWN_LEVEL,
            f"privacy level {entry.level!r} is not defined by config {entry.config_id}",
        )
    try:
        batch = oracle.unpack(entry.packed, entry.n)
    except LdptelError as error:
        raise CorruptEntryError(Quarantine.UNDECODABLE, str(error)) from None
    return Parsed(StateKey(entry.window, entry.config_id, entry.level), oracle, entry.n, batch)


def _concatenate(batches: list[ReportBatch]) -> ReportBatch:
    if len(batches) == 1:
        return batches[0]
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def _chunks(oracle: ReportMechanism, batches: list[ReportBatch]) -> Iterator[ReportBatch]:
    """Merge batches into chunks of about CELL_BUDGET / support_work reports."""
    limit = max(1, CELL_BUDGET // oracle.support_work)
    chunk: list[ReportBatch] = []
    rows = 0
    for batch in batches:
        chunk.append(batch)
        rows += len(next(iter(batch.values())))
        if rows >= limit:
            yield _concatenate(chunk)
            chunk, rows = [], 0
    if chunk:
        yield _concatenate(chunk)


def _valid_support(oracle: ReportMechanism, batch: ReportBatch) -> NDArray[np.int64] | None:
    """The support of a batch, or None if its values are outside what the oracle accepts
    (the collector validated them, so this means the stored bytes were corrupted)."""
    try:
        support = np.asarray(oracle.support(batch), dtype=np.int64)
    except (ValueError, IndexError, MemoryError, LdptelError):
        return None
    if support.shape != (oracle.support_size,) or (support < 0).any():
        return None
    return support


def group_support(
    oracle: ReportMechanism, entries: list[tuple[bytes, Parsed]]
) -> tuple[NDArray[np.int64], list[bytes]]:
    """Total support of many entries of one state, and the ids of entries whose values are
    corrupt (found by recounting entry by entry only when a merged count fails)."""
    total = np.zeros(oracle.support_size, dtype=np.int64)
    for chunk in _chunks(oracle, [parsed.batch for _, parsed in entries]):
        support = _valid_support(oracle, chunk)
        if support is None:
            break
        total += support
    else:
        return total, []
    total[:] = 0
    corrupt = []
    for entry_id, parsed in entries:
        support = _valid_support(oracle, parsed.batch)
        if support is None:
            corrupt.append(entry_id)
        else:
            total += support
    return total, corrupt


def group_log(oracle: ReportLog, entries: list[tuple[bytes, Parsed]]) -> tuple[bytes, list[bytes]]:
    """The log records of many entries of one state, in stream order, and the ids of
    entries whose values a record cannot hold (corrupt)."""
    records: list[bytes] = []
    corrupt = []
    for entry_id, parsed in entries:
        try:
            records.append(oracle.log_bytes(parsed.batch))
        except (ValueError, LdptelError):
            corrupt.append(entry_id)
    return b"".join(records), corrupt


class ShardStep:
    """Aggregation of one shard of one campaign by the holder of its lease."""

    def __init__(self, client: RedisClient, registry: Registry, name: str, shard: int) -> None:
        self.client = client
        self.registry = registry
        self.name = name
        self.shard = shard
        self.stream = keys.stream(name, shard)
        self.checkpoint = keys.checkpoint(name, shard)
        self.lease_key = keys.lease(name, shard)
        self.quarantine = keys.quarantine(name, shard)
        self.pruned = keys.pruned_states(name, shard)
        self._entry_bytes: int | None = None  # largest mean payload per entry seen so far

    def read_count(self, max_entries: int) -> int:
        """Entries to read next: max_entries, fewer if they would exceed READ_BUDGET bytes
        (a first small read measures the entries' size)."""
        if self._entry_bytes is None:
            return min(max_entries, 16)
        return max(1, min(max_entries, READ_BUDGET // max(self._entry_bytes, 1)))

    def run(self, lease_token: str, max_entries: int) -> StepResult:
        """Read up to `max_entries` entries after the checkpoint and apply them atomically."""
        try:
            return self._run_on_node(lease_token, max_entries)
        except SLOT_MOVED_ERRORS:
            # Redis Cluster: the shard's slot moved since the slot map was read. MOVED/ASK/
            # TRYAGAIN come before EXEC ran, so nothing was applied: re-read the map, retry.
            refresh_slots(self.client)
            return self._run_on_node(lease_token, max_entries)

    def _run_on_node(self, lease_token: str, max_entries: int) -> StepResult:
        # Every key of the step shares the shard's hash tag: one slot, one node.
        client = node_client(self.client, self.checkpoint)
        with client.pipeline(transaction=True) as pipe:
            try:
                return self._step(pipe, lease_token, max_entries)
            except redis.WatchError:
                return StepResult(lost=True)

    def _step(self, pipe: Pipeline, lease_token: str, max_entries: int) -> StepResult:
        # The pruned set too: a prune committing during this step makes its EXEC fail.
        pipe.watch(self.checkpoint, self.lease_key, self.pruned)  # type: ignore[no-untyped-call]
        owner = pipe.get(self.lease_key)
        if owner is None or text(owner) != lease_token:
            pipe.unwatch()
            return StepResult(lost=True)
        last = pipe.get(self.checkpoint)
        start = "-" if last is None else f"({text(last)}"
        count = self.read_count(max_entries)
        entries = stream_entries(pipe.xrange(self.stream, min=start, max="+", count=count))
        if not entries:
            pipe.unwatch()
            return StepResult(caught_up=True)
        payload = sum(len(fields.get(codec.PACKED, b"")) for _, fields in entries)
        self._entry_bytes = max(self._entry_bytes or 0, payload // len(entries))

        result = StepResult(entries=len(entries), caught_up=len(entries) < count)
        groups, rejected = self._parse(entries)
        self._drop_pruned(pipe, groups, rejected)
        deltas = self._deltas(pipe, groups, rejected)
        pipe.multi()
        self._queue(pipe, deltas, rejected, dict(entries), result)
        pipe.set(self.checkpoint, entries[-1][0])
        pipe.execute()
        return result

    def _parse(
        self, entries: list[tuple[bytes, dict[bytes, bytes]]]
    ) -> tuple[dict[StateKey, list[tuple[bytes, Parsed]]], Rejected]:
        """Entries grouped by state, and the rejected ones with their reasons."""
        groups: dict[StateKey, list[tuple[bytes, Parsed]]] = defaultdict(list)
        rejected: Rejected = {}
        for entry_id, fields in entries:
            try:
                parsed = parse_entry(self.registry, self.name, fields)
            except CorruptEntryError as error:
                rejected[entry_id] = (error.code, str(error))
                continue
            groups[parsed.state].append((entry_id, parsed))
        return groups, rejected

    def _drop_pruned(
        self,
        pipe: Pipeline,
        groups: dict[StateKey, list[tuple[bytes, Parsed]]],
        rejected: Rejected,
    ) -> None:
        """Move the entries of pruned states (aggregator/retention.py) to `rejected`: counted
        into a new, partial state, they would rebuild and replace that window's report."""
        states = list(groups)
        if not states:
            return
        flags = pipe.smismember(self.pruned, [state.member for state in states])
        for state, pruned in zip(states, flags, strict=True):
            if pruned:
                for entry_id, _ in groups.pop(state):
                    rejected[entry_id] = (Quarantine.PRUNED, PRUNED_REASON)

    def _deltas(
        self,
        pipe: Pipeline,
        groups: dict[StateKey, list[tuple[bytes, Parsed]]],
        rejected: Rejected,
    ) -> list[Delta]:
        """(Before MULTI) each state's support delta, with the packed vector it adds to; the
        corrupt entries join `rejected`."""
        deltas = []
        for state, members in groups.items():
            oracle = members[0][1].oracle
            if isinstance(oracle, ReportLog):
                log, corrupt = group_log(oracle, members)
                delta = Delta(state, 0, log=log)
            else:
                support, corrupt = group_support(oracle, members)
                delta = Delta(state, 0, support)
            for entry_id in corrupt:
                rejected[entry_id] = (
                    Quarantine.OUT_OF_RANGE,
                    "report values outside the oracle's range",
                )
            delta.n = sum(parsed.n for entry_id, parsed in members if entry_id not in rejected)
            if not delta.n:
                continue
            if delta.support is not None and rewrites(delta.support):
                size = delta.support.size
                delta.packed = read_packed(pipe, self.name, self.shard, state, size)
            deltas.append(delta)
        return deltas

    def _queue(
        self,
        pipe: Pipeline,
        deltas: list[Delta],
        rejected: Rejected,
        fields_by_id: dict[bytes, dict[bytes, bytes]],
        result: StepResult,
    ) -> None:
        """Queue (inside MULTI) the support deltas and the quarantined entries."""
        for delta in deltas:
            if delta.log is not None:
                append_log(pipe, self.name, self.shard, delta.state, delta.n, delta.log)
            else:
                assert delta.support is not None
                add_delta(
                    pipe, self.name, self.shard, delta.state, delta.n, delta.support, delta.packed
                )
            result.reports += delta.n
            result.touched.add(delta.state)
        for entry_id, (code, reason) in rejected.items():
            moved: dict[FieldT, EncodableT] = dict(fields_by_id[entry_id].items())
            moved.update({b"entry": entry_id, b"code": code.value, b"reason": reason.encode()})
            pipe.xadd(self.quarantine, moved, maxlen=QUARANTINE_MAXLEN, approximate=True)
        result.quarantined = len(rejected)
