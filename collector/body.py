"""Reading an untrusted JSON request body under a size cap, gzip included.

A batch's text is capped by what a valid batch of its campaign can be (Ingestor.text_limit),
before any JSON object is built: the campaign is read from the text itself
(`"campaign": "<name>"`), so a 4 KiB gzip bomb stops at the campaign's cap, not 4 MiB.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from typing import IO

from ldptel.collector.errors import ApiError, bad_request
from ldptel.collector.ingest import parse_batch

_CHUNK = 64 * 1024
#: The first inflated bytes, in which a batch names its campaign (the SDK writes it first).
HEAD_BYTES = 64 * 1024
#: The batch's `"campaign": "<name>"`, read before the JSON is parsed. Inside a JSON string a
#: quote is escaped, so this only matches a key; that it is the top-level one is checked after
#: parsing (`named_campaign` must equal the parsed campaign).
_CAMPAIGN_FIELD = re.compile(rb'"campaign"\s*:\s*"([a-z0-9][a-z0-9_-]{0,63})"')


def too_large(max_bytes: int) -> ApiError:
    return ApiError(
        413,
        "body",
        f"larger than {max_bytes} bytes",
        code="too_large",
        headers={"Connection": "close"},
    )


def check_headers(
    mimetype: str, content_length: int | None, content_encoding: str, max_bytes: int
) -> str:
    """Reject by headers alone, before any byte of the body is read; returns the encoding."""
    if mimetype != "application/json":
        raise ApiError(415, "Content-Type", "must be application/json", code="media_type")
    if content_length is not None and content_length > max_bytes:
        raise too_large(max_bytes)
    encoding = content_encoding.strip().lower() or "identity"
    if encoding not in ("identity", "gzip"):
        raise ApiError(415, "Content-Encoding", "must be gzip or identity", code="content_encoding")
    return encoding


def read_capped(stream: IO[bytes], max_bytes: int) -> bytes:
    """The whole body, or 413 as soon as it passes `max_bytes` (chunked bodies included)."""
    parts: list[bytes] = []
    total = 0
    while True:
        part = stream.read(min(_CHUNK, max_bytes + 1 - total))
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > max_bytes:
            raise too_large(max_bytes)
        parts.append(part)


def named_campaign(text: bytes) -> str | None:
    """The campaign a batch's JSON text names (its first `"campaign": "<name>"`), if any."""
    found = _CAMPAIGN_FIELD.search(text)
    return None if found is None else found.group(1).decode("ascii")


def unnamed_batch(text: bytes, max_reports: int) -> ApiError:
    """The 400 for a batch text in which `named_campaign` finds no campaign: a text of at
    most HEAD_BYTES is parsed, to name the field at fault; a longer one is not."""
    if len(text) <= HEAD_BYTES:
        parse_batch(parse_json(text), max_reports)  # raises, naming the field
    return bad_request("campaign", "must be a campaign name ([a-z0-9][a-z0-9_-]{0,63})")


def gunzip_capped(
    data: bytes, max_bytes: int, limit: Callable[[bytes], int] | None = None
) -> bytes:
    """Decompress one gzip member, refusing to inflate past `max_bytes` (gzip bombs), or past
    `limit(head)` once the first HEAD_BYTES inflated bytes are known."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, min(HEAD_BYTES, max_bytes + 1))
        cap = max_bytes if limit is None else min(max_bytes, limit(out))
        if len(out) > cap:
            raise too_large(cap)
        if inflater.unconsumed_tail:
            out += inflater.decompress(inflater.unconsumed_tail, cap + 1 - len(out))
    except zlib.error as error:
        raise bad_request("body", "invalid gzip data") from error
    if len(out) > cap:
        raise too_large(cap)
    if not inflater.eof or inflater.unused_data:
        raise bad_request("body", "truncated gzip data or trailing bytes")
    return out


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every body (json.loads with options builds a new one per call).
_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode


def parse_json(data: bytes) -> object:
    """Strict JSON (no NaN or Infinity); 400 naming the body otherwise."""
    if not data:
        raise bad_request("body", "is empty; expected a JSON object")
    try:  # the text as json.loads reads bytes (UTF-8, -16 or -32, by their first bytes)
        return _DECODE(data.decode(json.detect_encoding(data), "surrogatepass"))
    except (ValueError, RecursionError) as error:
        raise bad_request("body", "malformed JSON", code="malformed_json") from error


def lone_surrogate(data: object, path: str = "") -> str | None:
    """The path of the first string (key or value) holding a lone UTF-16 surrogate, which
    JSON's `\\ud800` escapes can produce but no UTF-8 text can hold; None if there is none."""
    if isinstance(data, str):
        return None if data.isascii() or _encodes(data) else path or "body"
    if isinstance(data, list):
        items = ((f"{path}[{i}]", item) for i, item in enumerate(data))
    elif isinstance(data, dict):
        for key in data:
            if not _encodes(key):
                return path or "body"
        items = ((f"{path}.{key}" if path else key, item) for key, item in data.items())
    else:
        return None
    for where, item in items:
        found = lone_surrogate(item, where)
        if found is not None:
            return found
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
