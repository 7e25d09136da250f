"""Window state retention: `ldptel aggregator prune` deletes the window state of old, reported
windows (streams are trimmed after `retention_seconds`; window state is kept until this).

A state is deleted only when nothing can still change its stored report:
- its window ended at least one window length ago (the collector stamps a batch with the
  window of its arrival, so only a batch in flight that long, or a collector whose clock is
  that far behind, could still carry it);
- it is not pending (its stored report was built after its last delta) and a report of its
  window is stored;
- no entry of its window waits in the shard's stream after the checkpoint (it would be
  accepted, 2xx, and never counted).
The deletion and a marker (keys.pruned_states) commit in one transaction that fails if a step
moved the checkpoint or the pending versions meanwhile; steps WATCH the marker set and
quarantine a later entry of a pruned state instead of starting a partial state whose report
would replace the stored one (aggregator/shard.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import redis

from ldptel.aggregator.shard import stream_entries
from ldptel.aggregator.state import StateKey, list_states
from ldptel.aggregator.tree import horizon_end
from ldptel.store import codec, keys
from ldptel.store.connection import RedisClient, node_client, text
from ldptel.store.registry import Registry

#: Stream entries read per XRANGE when looking for unaggregated entries of a window.
_SCAN = 1000


@dataclass(frozen=True)
class PruneOutcome:
    """One state's fate: deleted (or would be, in a dry run) or kept, and why."""

    shard: int
    state: StateKey
    deleted: bool
    reason: str


def prune(
    client: RedisClient,
    registry: Registry,
    name: str,
    before: int,
    now: float,
    dry_run: bool = False,
) -> list[PruneOutcome]:
    """Delete the window states of campaign `name` whose window starts before `before` and
    that nothing can change any more (module doc); the outcome of every state considered."""
    outcomes: list[PruneOutcome] = []
    for shard in range(registry.shard_count(name)):
        for state in list_states(client, name, [shard]):
            if state.window < before:
                outcomes.append(_prune_state(client, registry, name, shard, state, now, dry_run))
    return outcomes


def window_pruned(client: RedisClient, registry: Registry, name: str, window: int) -> bool:
    """Whether a state of this window was pruned (its report can only be read as stored)."""
    for shard in range(registry.shard_count(name)):
        members = client.smembers(keys.pruned_states(name, shard))
        if any(StateKey.from_member(member).window == window for member in members):
            return True
    return False


def _prune_state(
    client: RedisClient,
    registry: Registry,
    name: str,
    shard: int,
    state: StateKey,
    now: float,
    dry_run: bool,
) -> PruneOutcome:
    config = registry.config(state.config_id)
    window_seconds = config.window_seconds if config is not None else 0
    if now < state.window + 2 * window_seconds:
        return PruneOutcome(shard, state, False, "its window ended less than a window ago")
    if config is not None and now < horizon_end(config, state.window) + window_seconds:
        reason = "memoization tree: the later windows of its horizon sum its node"
        return PruneOutcome(shard, state, False, reason)
    # Outside the shard's slot (a cluster node's transaction cannot read it); a stored report
    # is only ever replaced, so it need not be watched.
    if not client.exists(keys.report(name, state.window)):
        return PruneOutcome(shard, state, False, "no report of its window is stored")
    node = node_client(client, keys.checkpoint(name, shard))
    with node.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(keys.checkpoint(name, shard), keys.pending_reports(name, shard))  # type: ignore[no-untyped-call]
            reason = _why_kept(pipe, name, shard, state)
            if reason:
                pipe.unwatch()
                return PruneOutcome(shard, state, False, reason)
            if dry_run:
                pipe.unwatch()
                return PruneOutcome(shard, state, True, "would be deleted (dry run)")
            pipe.multi()
            pipe.delete(
                state.redis_key(name, shard),
                state.cells_key(name, shard),
                state.log_key(name, shard),
            )
            pipe.zrem(keys.state_index(name, shard), state.member)
            pipe.sadd(keys.pruned_states(name, shard), state.member)
            pipe.execute()
        except redis.WatchError:
            return PruneOutcome(
                shard, state, False, "a step changed the shard meanwhile; run again"
            )
    return PruneOutcome(shard, state, True, "deleted")


def _why_kept(pipe: redis.client.Pipeline, name: str, shard: int, state: StateKey) -> str:
    """Why the state must stay ("" if it may go), read under the caller's WATCH."""
    if pipe.hexists(keys.pending_reports(name, shard), state.member):
        return "its report is out of date (reports pending)"
    checkpoint = pipe.get(keys.checkpoint(name, shard))
    for fields in _backlog(pipe, name, shard, None if checkpoint is None else text(checkpoint)):
        window = fields.get(codec.WINDOW, b"")
        # A corrupt window field counts as this window: the entry may be of it.
        if not window.isdigit() or int(window) <= state.window:
            return "entries of its window are not aggregated yet"
    return ""


def _backlog(
    pipe: redis.client.Pipeline, name: str, shard: int, checkpoint: str | None
) -> Iterator[dict[bytes, bytes]]:
    """The fields of the stream's entries after the checkpoint, in chunks."""
    start = "-" if checkpoint is None else f"({checkpoint}"
    while True:
        reply = pipe.xrange(keys.stream(name, shard), min=start, max="+", count=_SCAN)
        entries = stream_entries(reply)
        for _, fields in entries:
            yield fields
        if len(entries) < _SCAN:
            return
        start = f"({text(entries[-1][0])}"
