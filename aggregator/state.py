"""Window state: per (campaign, config, window, level, shard) a Redis hash holding `n` and the
support vector, one field per item index with a nonzero count; or, for a support of
PACKED_FROM cells or more (a sketch's k m = 2^20), `n` in the hash and the vector packed in a
string beside it (keys.window_cells), one big-endian int64 per cell.

Support vectors of batches add, so a delta is applied with HINCRBY (exact 64-bit integers),
or to a packed vector: a sparse delta (at most SPARSE_CELLS nonzero cells) with one BITFIELD
INCRBY i64 per cell in one command; a dense one is read (under the step's WATCH), added and
written back with SET in the step's MULTI. That stays exactly once: any other write of the
vector would come from another step, which also moves the checkpoint, so one of the two
EXECs fails. Shards merge by adding their vectors when a report is built; a state may hold
both forms (read_state adds them), so the form can change between versions without a
migration.

Report log: a mechanism that declares its state a log (ReportLog: open-domain OLH, whose
estimate evaluates every report against each candidate) has `n` in the hash and its reports
appended (APPEND) to a string beside it (keys.window_log), `log_record` by record, in the
step's MULTI with the checkpoint: as for a packed vector, only a step that also moves the
checkpoint writes it, so an EXEC that fails appends nothing and each entry is logged once.
Shards merge by reading their logs one after the other (`LogView`).

Why packed: a hash field costs Redis about 50 bytes and one HINCRBY; at 2^20 cells one step's
script ran past 5 s, during which Redis answers BUSY to every other client (benchmarks/
README.md, "Sketch window state"). Packed, a state is 8 bytes a cell (8 MiB at 2^20) and a
step one BITFIELD, or one GET and one SET.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from redis.client import Pipeline

from ldptel.store import keys
from ldptel.store.connection import RedisClient, text

# One EVAL per state instead of one HINCRBY command per item: Python builds one command, and
# the script text (not EVALSHA) keeps it safe inside MULTI, where a NOSCRIPT error would not
# abort the rest of the transaction.
ADD_SCRIPT = """
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 0
"""


#: Supports of at least this many cells are stored packed: there one field per nonzero cell
#: costs more memory than 8 bytes per cell as soon as about a tenth of them are touched.
PACKED_FROM = 1 << 12
#: A delta to a packed vector with at most this many nonzero cells is one BITFIELD command
#: (no read); a denser one is read, added and written back whole.
SPARSE_CELLS = 1 << 14
#: BITFIELD's i64: signed, big-endian.
CELL = np.dtype(">i8")


def packs(size: int) -> bool:
    """Whether a support vector of `size` cells is stored packed."""
    return size >= PACKED_FROM


def rewrites(support: NDArray[np.int64]) -> bool:
    """Whether a delta to a packed vector is applied by reading and rewriting it whole."""
    return packs(support.size) and int(np.count_nonzero(support)) > SPARSE_CELLS


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

    def cells_key(self, name: str, shard: int) -> str:
        return keys.window_cells(name, shard, self.config_id, self.window, self.level)

    def log_key(self, name: str, shard: int) -> str:
        return keys.window_log(name, shard, self.config_id, self.window, self.level)


def read_packed(
    pipe: Pipeline, name: str, shard: int, state: StateKey, size: int
) -> NDArray[np.int64]:
    """(Before MULTI, in a step that WATCHes its checkpoint) the packed vector of a shard's
    state, zeros if none; the key is WATCHed too, so the sum written back is exact."""
    key = state.cells_key(name, shard)
    pipe.watch(key)  # type: ignore[no-untyped-call]
    return _unpacked(pipe.get(key), size)


def add_delta(
    pipe: Pipeline,
    name: str,
    shard: int,
    state: StateKey,
    n: int,
    support: NDArray[np.int64],
    packed: NDArray[np.int64] | None = None,
) -> None:
    """Queue (inside MULTI) the addition of n reports and their support to a shard's state:
    `packed` (the state's vector as `read_packed` read it, when `rewrites`) + support written
    back; a sparse delta to a packed vector as BITFIELD INCRBYs; else one HINCRBY per nonzero
    cell."""
    key = state.redis_key(name, shard)
    nonzero = np.flatnonzero(support)
    counts = zip(nonzero.tolist(), support[nonzero].tolist(), strict=True)
    if packed is not None:
        pipe.hincrby(key, "n", n)
        pipe.set(state.cells_key(name, shard), (packed + support).astype(CELL).tobytes())
    elif packs(support.size):
        pipe.hincrby(key, "n", n)
        if nonzero.size:
            increments = [a for i, c in counts for a in ("INCRBY", "i64", f"#{i}", c)]
            cells = state.cells_key(name, shard)
            pipe.execute_command("BITFIELD", cells, *increments)  # type: ignore[no-untyped-call]
    else:
        args: list[int | str] = ["n", n]
        for index, count in counts:
            args += [index, count]
        pipe.eval(ADD_SCRIPT, 1, key, *args)
    _indexed(pipe, name, shard, state)


def append_log(
    pipe: Pipeline, name: str, shard: int, state: StateKey, n: int, records: bytes
) -> None:
    """Queue (inside MULTI) n reports appended, as log records, to a shard's report log."""
    pipe.hincrby(state.redis_key(name, shard), "n", n)
    pipe.append(state.log_key(name, shard), records)
    _indexed(pipe, name, shard, state)


def _indexed(pipe: Pipeline, name: str, shard: int, state: StateKey) -> None:
    """Queue the state's entry in the shard's index and a bump of its pending version."""
    pipe.zadd(keys.state_index(name, shard), {state.member: state.window})
    pipe.hincrby(keys.pending_reports(name, shard), state.member, 1)


@dataclass(frozen=True)
class LogView:
    """The report logs of one state across shards as they were when `read_log` measured
    them: later steps only append, so the first `lengths[i]` bytes of shard i's log are
    what the reports estimate, and n is their number of records (consistent with the bytes
    read, whatever was appended since)."""

    client: RedisClient
    keys: tuple[str, ...]
    lengths: tuple[int, ...]
    record_size: int

    @property
    def n(self) -> int:
        return sum(self.lengths) // self.record_size

    def chunks(self, records: int) -> Iterator[bytes]:
        """The logged records, at most `records` per chunk (GETRANGE: bounded memory)."""
        step = max(1, records) * self.record_size
        for key, length in zip(self.keys, self.lengths, strict=True):
            for start in range(0, length, step):
                end = min(length, start + step) - 1  # GETRANGE's end is inclusive
                chunk = self.client.getrange(key, start, end)
                if not isinstance(chunk, bytes) or len(chunk) != end + 1 - start:
                    raise ValueError(f"report log {key} shorter than the {length} bytes measured")
                yield chunk


def read_log(
    client: RedisClient, name: str, shards: Iterable[int], state: StateKey, record_size: int
) -> LogView:
    """The report logs of `state` over `shards`, measured now (STRLEN), to be read in chunks."""
    log_keys = tuple(state.log_key(name, shard) for shard in shards)
    with client.pipeline(transaction=False) as pipe:
        for key in log_keys:
            pipe.strlen(key)
        lengths = tuple(int(length) for length in pipe.execute())
    for key, length in zip(log_keys, lengths, strict=True):
        if length % record_size:
            raise ValueError(f"report log {key} of {length} bytes: not {record_size}-byte records")
    return LogView(client, log_keys, lengths, record_size)


def read_state(
    client: RedisClient, name: str, shards: Iterable[int], state: StateKey, size: int
) -> tuple[int, NDArray[np.int64]]:
    """n and the support vector of `state`, summed over `shards` (both forms, whichever a
    state holds)."""
    shards = list(shards)
    with client.pipeline(transaction=False) as pipe:
        for shard in shards:
            pipe.hgetall(state.redis_key(name, shard))
            pipe.get(state.cells_key(name, shard))
        replies = pipe.execute()
    n = 0
    support = np.zeros(size, dtype=np.int64)
    for fields, packed in zip(replies[::2], replies[1::2], strict=True):
        for field, value in fields.items():
            if field == b"n":
                n += int(value)
            else:
                support[int(field)] += int(value)
        support += _unpacked(packed, size)
    return n, support


def _unpacked(value: bytes | str | None, size: int) -> NDArray[np.int64]:
    """A packed vector as read (redis-py types replies bytes | str; the store's clients never
    decode, so it is bytes), or zeros for none."""
    if value is None:
        return np.zeros(size, dtype=np.int64)
    if isinstance(value, str):
        raise TypeError("packed state read as text: the client must not decode responses")
    if len(value) > size * CELL.itemsize or len(value) % CELL.itemsize:
        raise ValueError(f"packed state of {len(value)} bytes for {size} cells")
    cells = np.zeros(size, dtype=np.int64)  # BITFIELD writes the string up to its last cell
    cells[: len(value) // CELL.itemsize] = np.frombuffer(value, dtype=CELL)
    return cells


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


def pending_windows(client: RedisClient, shard_counts: dict[str, int]) -> dict[str, set[int]]:
    """Per campaign with any: the windows whose report is out of date, every campaign's
    shards read in one pipeline."""
    shards = [(name, shard) for name, count in shard_counts.items() for shard in range(count)]
    with client.pipeline(transaction=False) as pipe:
        for name, shard in shards:
            pipe.hkeys(keys.pending_reports(name, shard))
        found = pipe.execute()
    windows: dict[str, set[int]] = {}
    for (name, _), members in zip(shards, found, strict=True):
        for member in members:
            windows.setdefault(name, set()).add(StateKey.from_member(text(member)).window)
    return windows


def reported(
    client: RedisClient, name: str, pending: dict[int, dict[str, bytes]], window: int
) -> None:
    """Mark the pending states of `window` (as read before its report was built) reported."""
    for shard, members in pending.items():
        for member, version in members.items():
            if StateKey.from_member(member).window == window:
                client.eval(_DONE, 1, keys.pending_reports(name, shard), member, version)
