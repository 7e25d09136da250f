"""Window reports as stored documents: the aggregator saves one JSON document per (campaign,
window) under keys.report, the collector serves those bytes unchanged, the CLI reads them.
Windows are named by their start in unix seconds; people may write an ISO date instead."""

from __future__ import annotations

from datetime import datetime, timezone

from ldptel.client.errors import ParameterError
from ldptel.store import keys
from ldptel.store.connection import RedisClient, data, text

#: 9999-12-31T23:59:59Z, the last second an ISO date can name.
LAST_SECOND = 253_402_300_799


def iso(timestamp: float) -> str:
    """UTC ISO 8601 with a Z."""
    text = datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="seconds")
    return text.replace("+00:00", "Z")


def parse_window(text: str) -> int:
    """A window start from unix seconds or an ISO date / date-time (UTC if no zone)."""
    text = text.strip()
    if text.isascii() and text.isdigit():  # not "²": str.isdigit takes it, int() does not
        seconds = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ParameterError("window", "must be unix seconds or an ISO date/time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        seconds = int(moment.timestamp())
    if not 0 <= seconds <= LAST_SECOND:
        raise ParameterError("window", "must be between 1970 and the year 9999")
    return seconds


def save(client: RedisClient, name: str, window: int, document: bytes) -> None:
    """Store a window's report document (JSON bytes), replacing an older build, then bump
    its version in the campaign's index (after: a version read before a load is never newer
    than the document loaded, so a reader's cache can only be stale until the next read)."""
    client.set(keys.report(name, window), document)
    client.hincrby(keys.report_index(name), str(window), 1)


def versions(client: RedisClient, name: str) -> dict[int, int]:
    """Window start -> version of every stored report of a campaign, oldest window first."""
    index = client.hgetall(keys.report_index(name))
    return dict(sorted((int(text(window)), int(text(n))) for window, n in index.items()))


def load(client: RedisClient, name: str, window: int) -> bytes | None:
    """The stored report document of a window, or None if none was built yet."""
    raw = client.get(keys.report(name, window))
    return None if raw is None else data(raw)


def load_many(client: RedisClient, name: str, windows: list[int]) -> list[bytes | None]:
    """The stored documents of several windows in one round trip (None: not stored)."""
    pipeline = client.pipeline(transaction=False)
    for window in windows:
        pipeline.get(keys.report(name, window))
    return [None if raw is None else data(raw) for raw in pipeline.execute()]
