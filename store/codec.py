"""The stream-entry codec: one validated client batch is one stream entry (DESIGN.md, "Redis
data model"). The collector's ingest script writes the fields `encode` gives, in that order;
the aggregator reads them back with `decode`. Nothing else is stored with a batch: no sender,
no arrival time (the entry id is the window start, collector/ingest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

#: Field names on the wire of the stream: short, as every entry repeats them.
CONFIG_ID, WINDOW, COUNT, PACKED, LEVEL = b"c", b"w", b"n", b"p", b"l"


class Quarantine(str, Enum):
    """Why an entry was set aside instead of counted: the `code` field of its copy in the
    shard's quarantine stream (keys.quarantine), beside the `reason` in words."""

    MALFORMED = "malformed_entry"  # a stream field missing or not of its type
    UNKNOWN_CONFIG = "unknown_config"
    CONFIG_REFUSED = "config_refused"  # stored, but refused on load (a weakened guarantee)
    OTHER_CAMPAIGN = "config_of_another_campaign"
    WINDOW_MISALIGNED = "window_not_aligned"
    UNKNOWN_LEVEL = "level_not_defined"
    UNDECODABLE = "reports_undecodable"  # the packed reports do not unpack
    OUT_OF_RANGE = "report_values_out_of_range"
    PRUNED = "window_pruned"  # its window's state was deleted (ldptel aggregator prune)


class CorruptEntryError(Exception):
    """A stream entry that cannot be counted: why (`code`), and the reason in words (the
    message)."""

    def __init__(self, code: Quarantine, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class StreamEntry:
    """One stored batch: its config, window start (unix s), report count, the oracle's
    packed reports and the privacy level ("" for a campaign without levels)."""

    config_id: str
    window: int
    n: int
    packed: bytes
    level: str = ""


def encode(entry: StreamEntry) -> dict[bytes, bytes | str | int]:
    """The entry as XADD's fields, in a fixed order."""
    return {
        CONFIG_ID: entry.config_id, WINDOW: entry.window, COUNT: entry.n,
        PACKED: entry.packed, LEVEL: entry.level,
    }  # fmt: skip


def flat(entry: StreamEntry) -> list[bytes | str | int]:
    """The fields as one list of field, value, field, value... (for a script's ARGV)."""
    return [item for pair in encode(entry).items() for item in pair]


def decode(fields: Mapping[bytes, bytes]) -> StreamEntry:
    """The entry read back from XRANGE's fields; raises CorruptEntryError."""
    for required in (CONFIG_ID, WINDOW, COUNT, PACKED):
        if required not in fields:
            raise CorruptEntryError(Quarantine.MALFORMED, f"missing field {required.decode()}")
    try:
        config_id = fields[CONFIG_ID].decode("ascii")
        level = fields.get(LEVEL, b"").decode("ascii")
    except UnicodeDecodeError:
        raise CorruptEntryError(Quarantine.MALFORMED, "config id or level is not ASCII") from None
    return StreamEntry(
        config_id=config_id,
        window=_integer(fields, WINDOW, 0),
        n=_integer(fields, COUNT, 1),
        packed=fields[PACKED],
        level=level,
    )


def _integer(fields: Mapping[bytes, bytes], name: bytes, minimum: int) -> int:
    try:
        value = int(fields[name])
    except ValueError:
        raise CorruptEntryError(
            Quarantine.MALFORMED, f"field {name.decode()} is not an integer"
        ) from None
    if value < minimum:
        raise CorruptEntryError(Quarantine.MALFORMED, f"field {name.decode()} must be >= {minimum}")
    return value
