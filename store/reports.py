"""Window reports as stored documents: the aggregator saves one JSON document per (campaign,
window) under keys.report, the collector serves those bytes unchanged, the CLI reads them.
Windows are named by their start in unix seconds; people may write an ISO date instead."""

from __future__ import annotations

from datetime import datetime, timezone

from ldptel.client.errors import ParameterError
from ldptel.store import keys
from ldptel.store.connection import RedisClient, data

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
    """Store a window's report document (JSON bytes), replacing an older build."""
    client.set(keys.report(name, window), document)


def load(client: RedisClient, name: str, window: int) -> bytes | None:
    """The stored report document of a window, or None if none was built yet."""
    raw = client.get(keys.report(name, window))
    return None if raw is None else data(raw)
