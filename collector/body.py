"""Reading an untrusted JSON request body under a size cap, gzip included."""

from __future__ import annotations

import json
import zlib
from typing import IO

from ldptel.collector.errors import ApiError, bad_request

_CHUNK = 64 * 1024


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


def gunzip_capped(data: bytes, max_bytes: int) -> bytes:
    """Decompress one gzip member, refusing to inflate past `max_bytes` (gzip bombs)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as error:
        raise bad_request("body", "invalid gzip data") from error
    if len(out) > max_bytes:
        raise too_large(max_bytes)
    if not inflater.eof or inflater.unused_data:
        raise bad_request("body", "truncated gzip data or trailing bytes")
    return out


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(data: bytes) -> object:
    """Strict JSON (no NaN or Infinity); 400 naming the body otherwise."""
    if not data:
        raise bad_request("body", "is empty; expected a JSON object")
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        raise bad_request("body", "malformed JSON", code="malformed_json") from error
