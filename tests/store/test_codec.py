"""The stream-entry codec: what the collector's script stores is what the aggregator reads,
and an entry that is not of the contract is named as corrupt, with the reason."""

from __future__ import annotations

import pytest

from ldptel.store import codec
from ldptel.store.codec import CorruptEntryError, StreamEntry


def stored(entry: StreamEntry) -> dict[bytes, bytes]:
    """The fields as Redis hands them back: names and values as bytes."""
    return {
        name: v if isinstance(v, bytes) else str(v).encode()
        for name, v in codec.encode(entry).items()
    }


def test_an_entry_reads_back_as_written() -> None:
    entry = StreamEntry("0123456789abcdef", 1_700_006_400, 3, b"\x00\x01\xff", "high")
    assert codec.decode(stored(entry)) == entry
    assert codec.flat(entry)[::2] == [b"c", b"w", b"n", b"p", b"l"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({b"p": None}, "missing field p"),
        ({b"n": b"0"}, "field n must be >= 1"),
        ({b"w": b"soon"}, "field w is not an integer"),
        ({b"c": b"\xff"}, "not ASCII"),
    ],
)
def test_a_corrupt_entry_says_why(change: dict[bytes, bytes | None], reason: str) -> None:
    fields = stored(StreamEntry("0123456789abcdef", 0, 1, b"x"))
    for name, value in change.items():
        if value is None:
            del fields[name]
        else:
            fields[name] = value
    with pytest.raises(CorruptEntryError, match=reason):
        codec.decode(fields)
