"""The canonical JSON a config id hashes: the JSON Canonicalization Scheme (JCS, RFC 8785).

Keys sorted by their UTF-16 code units, no whitespace, strings escaped as ECMAScript's
JSON.stringify escapes them, numbers written as ECMAScript's Number.prototype.toString writes
the IEEE-754 double (shortest round-trip digits; `1` for 1.0, `0.00001`, `1e-7`, `1e+21`),
UTF-8. Any JCS library in another language gives the same bytes (docs/protocol.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from ldptel.client.errors import ParameterError

#: Integers beyond 2^53 have no exact double: JCS cannot write them faithfully.
_MAX_EXACT_INTEGER = 2**53


def canonical_json(value: object) -> str:
    """The JCS text of a JSON value (dict, list, tuple, str, int, float, bool, None).
    Raises ParameterError for values JSON cannot hold canonically (NaN, infinities, integers
    above 2^53, strings with unpaired surrogates, non-string keys)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: object, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(_string(value))
    elif isinstance(value, int):
        if abs(value) > _MAX_EXACT_INTEGER:
            raise ParameterError("config", f"integer {value} has no exact IEEE-754 double")
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(number(value))
    elif isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise ParameterError("config", "object keys must be strings")
        parts.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_units)):
            parts.append("," if i else "")
            parts.append(_string(key))
            parts.append(":")
            _write(value[key], parts)
        parts.append("}")
    elif isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
        # A domain of labels: one call of the C encoder, whose strings are JCS's (_string).
        _check_utf8("".join(value))
        parts.append(json.dumps(list(value), ensure_ascii=False, separators=(",", ":")))
    elif isinstance(value, Sequence):
        parts.append("[")
        for i, item in enumerate(value):
            parts.append("," if i else "")
            _write(item, parts)
        parts.append("]")
    else:
        raise ParameterError("config", f"{type(value).__name__} is not a JSON value")


def _utf16_units(key: str) -> bytes:
    # RFC 8785, Sec. 3.2.3: properties sorted by their UTF-16 code units (big-endian bytes
    # compare as the units do); differs from code-point order only beyond U+FFFF.
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    # RFC 8785, Sec. 3.2.2.2: \" \\ \b \f \n \r \t, other controls below U+0020 as \u00xx
    # (lower-case hex), everything else literal. Python's encoder with ensure_ascii=False
    # writes exactly this; a lone surrogate has no UTF-8 form and is refused.
    _check_utf8(text)
    return json.dumps(text, ensure_ascii=False)


def _check_utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ParameterError("config", "strings must not hold unpaired surrogates") from error


def number(value: float) -> str:
    """ECMAScript Number.prototype.toString of a finite double (RFC 8785, Sec. 3.2.2.3)."""
    if not math.isfinite(value):
        raise ParameterError("config", f"{value!r} is not a JSON number")
    if value == 0:
        return "0"  # also -0.0
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip (as ECMAScript requires), as
    # mantissa[e exponent]; read them as digits s and the decimal exponent n: value = 0.s * 10^n.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    n = len(whole.lstrip("0")) + int(exponent or 0)
    if not whole.lstrip("0"):  # 0.000ddd: the leading zeros of the fraction lower n
        n = int(exponent or 0) - (len(fraction) - len(fraction.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        exp = f"{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp
    return sign + text
