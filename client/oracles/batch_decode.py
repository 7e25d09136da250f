"""Whole-batch decoding of untrusted reports: a batch is decoded in a few whole-batch C
passes when every report is well formed; if any check fails, the per-report path runs
instead and raises the error naming the first bad report, field and reason, so errors are
those of the per-report path by construction (tests/client/oracles/test_batch_decode.py)."""

from __future__ import annotations

import array
import binascii
import functools
import marshal
from collections.abc import Sequence
from itertools import repeat
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import ReportBatch, check_reports, report_int

_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: bytes.translate table: each base64 character to its six bits, the padding "=" to _PAD,
#: any other byte (the separator "\n" included) to _INVALID.
_PAD, _INVALID = 0x40, 0xFF
SIXBITS = bytearray([_INVALID]) * 256
for _value, _char in enumerate(_BASE64_ALPHABET):
    SIXBITS[_char] = _value
SIXBITS[ord("=")] = _PAD
#: bytes.translate table of a batch's shape: each base64 character to "A", "=" and the
#: separator "\n" to themselves, any other byte to "!".
SHAPES = bytearray(b"!") * 256
SHAPES[ord("=")], SHAPES[ord("\n")] = ord("="), ord("\n")
for _char in _BASE64_ALPHABET:
    SHAPES[_char] = ord("A")
#: bytes.translate table: "=" to "A" (six zero bits), any other byte to itself.
_PAD_AS_ZERO = bytes(range(256)).replace(b"=", b"A")

#: Texts of at most this many characters (one base64 group: RAPPOR's at k <= 24, unary and
#: CMS bit vectors of up to 24 bits) take `short_rows`, whose cost is per character; the
#: grid's numpy calls cost per row as much at this size (1000 texts of 4 characters, without
#: the field reads: 27 us against 35), and from 8 characters on the grid costs less or the same.
SHORT_CHARS = 4


#: Fewer base64 reports than this take the per-report path: its cost grows with n, the
#: whole-batch path's dozen numpy calls cost about the same for 1 report as for 16 (one OUE
#: report at d = 64: 3 us per report, 20-37 us whole-batch; they meet between 16 and 32).
WHOLE_BATCH_MIN = 16


def report_column(items: Sequence[Any], name: str) -> list[Any] | None:
    """Field `name` of every report (None where it is absent), or None unless every report
    is an object: `dict.get` unbound refuses anything but a dict, in C."""
    try:
        return list(map(dict.get, items, repeat(name)))
    except TypeError:
        return None


def sixbit_rows(texts: list[Any], chars: int) -> NDArray[np.uint8] | None:
    """(n, chars + 1): the six-bit values (SIXBITS) of n texts each followed by a separator,
    if they are ASCII strings of `chars` characters in all; None if not."""
    try:
        data = "\n".join([*texts, ""]).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # a field absent, not a string, not ASCII
        return None
    if len(data) != len(texts) * (chars + 1):
        return None
    return np.frombuffer(data.translate(SIXBITS), dtype=np.uint8).reshape(len(texts), chars + 1)


def base64_bytes(six: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """Groups of four six-bit values to three bytes (RFC 4648, Sec. 4), row by row."""
    groups = np.ascontiguousarray(six).reshape(-1, 4)
    first, second, third, fourth = groups.T
    out = np.empty((groups.shape[0], 3), dtype=np.uint8)
    out[:, 0] = first << 2 | second >> 4
    out[:, 1] = second << 4 | third >> 2
    out[:, 2] = third << 6 | fourth
    return out.reshape(six.shape[0], -1)


def decode_base64_column(items: Sequence[Any], name: str, size: int) -> NDArray[np.uint8] | None:
    """The (n, size) bytes of every report's field `name` if each is the canonical base64
    text of `size` bytes, decoded for the whole batch at once; None if any is not, or if the
    batch is too small for the whole-batch path to pay (WHOLE_BATCH_MIN)."""
    if len(items) < WHOLE_BATCH_MIN:
        return None
    texts = report_column(items, name)
    if texts is None:
        return None
    chars, pads = 4 * -(-size // 3), -size % 3
    if chars <= SHORT_CHARS:
        return short_rows(texts, size, chars, pads)
    grid = sixbit_rows(texts, chars)
    if grid is None:
        return None
    # XOR: "=" in the last `pads` places of each text to 0, anything else there to >= 64;
    # alphabet characters before them keep their six bits. Then the n separators can only be
    # in the last column: every text has `chars` characters.
    six = grid[:, :chars] ^ _pad_places(chars, pads)
    if six.max() >= 64:
        return None
    rows = base64_bytes(six)
    # Canonical: the last character's unused low bits, decoded past `size`, are zero.
    if rows[:, size:].any():
        return None
    return np.ascontiguousarray(rows[:, :size])


def short_rows(texts: list[Any], size: int, chars: int, pads: int) -> NDArray[np.uint8] | None:
    """`decode_base64_column`'s result for short texts: the same checks, on the joined text
    by `bytes` methods, and one binascii decode of the whole batch."""
    try:
        data = "\n".join(texts).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # a field absent, not a string, not ASCII
        return None
    # Every text `chars - pads` base64 characters then `pads` "=", the n - 1 separators
    # between them: any other length, character or "=" changes the shape.
    shape = (b"A" * (chars - pads) + b"=" * pads + b"\n") * len(texts)
    if data.translate(SHAPES) != shape[:-1]:
        return None
    # Well formed, so "=" as "A" decodes each text to whole groups of 3 bytes: `size`, then
    # the bytes holding the last character's unused bits, zero if the text is canonical.
    raw = binascii.a2b_base64(data.translate(_PAD_AS_ZERO, b"\n"))
    width = chars // 4 * 3
    zeros = bytes(len(texts))
    if any(raw[spare::width] != zeros for spare in range(size, width)):
        return None
    heads = np.frombuffer(raw, dtype=_leading_bytes(size, width))["head"].copy()
    return heads.view(np.uint8).reshape(len(texts), size)


@functools.cache
def _leading_bytes(size: int, width: int) -> np.dtype[np.void]:
    """A record of `width` bytes whose field "head" is its first `size`: copying that field
    drops the rest of every row in one strided pass (numpy slices cost per row here)."""
    return np.dtype({"names": ["head"], "formats": [f"V{size}"], "offsets": [0], "itemsize": width})


@functools.cache
def _pad_places(chars: int, pads: int) -> NDArray[np.uint8]:
    places = np.zeros(chars, dtype=np.uint8)
    places[chars - pads :] = _PAD
    return places


def int_column(
    items: Sequence[Any], name: str, limit: int, dtype: type[np.unsignedinteger[Any]]
) -> NDArray[np.unsignedinteger[Any]] | None:
    """Field `name` of every report as `dtype` if each is an int (not a bool) in [0, limit),
    decoded for the whole batch at once; None if any is not."""
    column = report_column(items, name)
    if column is None:
        return None
    values = int32_values(column) if limit <= 2**31 else wide_values(column, dtype)
    if values is None or (values.size and values.max() >= limit):
        return None
    return np.ascontiguousarray(values, dtype=dtype)


#: marshal's version 2 writes an int in [-2^31, 2^31) as b"i" and its 4 bytes little-endian
#: (a list as b"[" and its 4-byte length first), and anything else with another type byte
#: (b"T" or b"F" a bool, b"l" a larger int, b"g" a float, b"u" a string, b"N" None, ...)
#: or not at all (ValueError: an int subclass, an object it cannot write).
_MARSHAL_INTS = np.dtype([("type", "S1"), ("value", "<u4")])


def int32_values(column: list[Any]) -> NDArray[np.uint32] | None:
    """The values of a column of ints in [-2^31, 2^31) (exactly ints: PyLong_CheckExact), a
    negative one read as 2^32 plus it; None if any is not such an int. One marshal pass types
    every item exactly and writes the values in place (1000 ints: 9 us, against 19 for a
    `set(map(type, ...))` and `array.array`). A malformed item costs marshal time linear in
    its size, as parsing it from the request body did (1 MB of JSON: 1-1.5 ms, 0.8-12 ms)."""
    try:
        data = marshal.dumps(column, 2)
    except ValueError:
        return None
    # Item i's type byte is at 5 + 5 i if every item before it is such an int, so b"i" at
    # all n of them is exactly n such ints (and the n x 5 bytes after the list's header).
    if data[5::5] != b"i" * len(column):
        return None
    return np.frombuffer(data, dtype=_MARSHAL_INTS, offset=5)["value"]


#: The array.array type code of the unsigned integers of each size in bytes.
_ARRAY_CODES = {array.array(code).itemsize: code for code in "BHILQ"}


def wide_values(
    column: list[Any], dtype: type[np.unsignedinteger[Any]]
) -> NDArray[np.unsignedinteger[Any]] | None:
    """The values of a column of ints as `dtype`; None if any is not an int (bools and int
    subclasses too: they take the per-report path), or is negative or too large for it."""
    if not set(map(type, column)) <= {int}:
        return None
    try:  # a negative value, or one too large for dtype, raises
        # array.array fills the column in C at about half np.fromiter's cost (1000 ints:
        # 10 against 23 us), so a narrow report's integers cost no more than its bits.
        code = _ARRAY_CODES[np.dtype(dtype).itemsize]
        return np.frombuffer(array.array(code, column), dtype=dtype)
    except OverflowError:
        return None


def decode_int_fields(
    reports: object, limits: dict[str, tuple[int, type[np.unsignedinteger[Any]]]]
) -> ReportBatch:
    """Validate untrusted reports {name: int in [0, limit), ...} for each name of `limits`;
    returns each column as its `dtype` (which must hold every integer below its limit)."""
    items = check_reports(reports)
    fast = {name: int_column(items, name, *limits[name]) for name in limits}
    if all(column is not None for column in fast.values()):
        return cast(ReportBatch, fast)
    columns = {name: np.empty(len(items), dtype=dtype) for name, (_, dtype) in limits.items()}
    for i, report in enumerate(items):
        if not isinstance(report, dict):
            raise ReportError("report", "must be an object", i)
        for name, (limit, _) in limits.items():
            columns[name][i] = report_int(report, name, limit, i)
    return columns


def decode_int_field(
    reports: object,
    name: str,
    limit: int,
    dtype: type[np.unsignedinteger[Any]] = np.uint32,
) -> NDArray[np.unsignedinteger[Any]]:
    """Validate untrusted reports {name: int in [0, limit)}; returns the column as `dtype`."""
    return decode_int_fields(reports, {name: (limit, dtype)})[name]
