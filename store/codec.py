"""The stream-entry codec: one validated client batch is one stream entry (DESIGN.md, "Redis
data model"). The collector's ingest script writes the fields `encode` gives, in that order;
the aggregator reads them back with `decode`. Nothing else is stored with a batch: no sender,
no arrival time (the entry id is the window start, collector/ingest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Field names on the wire of the stream: short, as every entry repeats them.
CONFIG_ID, WINDOW, COUNT, PACKED, LEVEL = b"c", b"w", b"n", b"p", b"l"


class CorruptEntryError(Exception):
    """A stream entry that cannot be counted; the message is the quarantine reason."""


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
            raise CorruptEntryError(f"missing field {required.decode()}")
    try:
        config_id = fields[CONFIG_ID].decode("ascii")
        level = fields.get(LEVEL, b"").decode("ascii")
    except UnicodeDecodeError:
        raise CorruptEntryError("config id or level is not ASCII") from None
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
        raise CorruptEntryError(f"field {name.decode()} is not an integer") from None
    if value < minimum:
        raise CorruptEntryError(f"field {name.decode()} must be >= {minimum}")
    return value
