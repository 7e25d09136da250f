"""Whole-batch decoding (client/oracles/batch_decode.py) against the per-report path:
for every oracle whose reports are byte strings or integers, on valid batches and on batches
with one or two reports broken in every way a JSON body can break them, `decode` returns the
same columns (values and dtypes) or raises the same error (field, reason, index) as the
per-report path alone."""

from __future__ import annotations

import binascii
import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ldptel.client.errors import ReportError
from ldptel.client.oracles import batch_decode, histogram, make_oracle, unary
from ldptel.client.oracles.base import FrequencyOracle

# Every pad count (size % 3 = 0, 1, 2), with and without spare padding bits, on both sides
# of batch_decode.SHORT_CHARS (texts of 4 characters; of 8, 12, 24 and 28).
ORACLES: dict[str, Callable[[], FrequencyOracle]] = {
    "oue d=64": lambda: make_oracle("oue", epsilon=1.0, domain_size=64),
    "oue d=72": lambda: make_oracle("oue", epsilon=1.0, domain_size=72),
    "oue d=9": lambda: make_oracle("oue", epsilon=1.0, domain_size=9),
    "oue d=5": lambda: make_oracle("oue", epsilon=1.0, domain_size=5),
    "oue d=48": lambda: make_oracle("oue", epsilon=1.0, domain_size=48),
    "sue d=30": lambda: make_oracle("sue", epsilon=1.0, domain_size=30),
    "sue d=20": lambda: make_oracle("sue", epsilon=1.0, domain_size=20),
    "sue d=24": lambda: make_oracle("sue", epsilon=1.0, domain_size=24),
    "ss d=16": lambda: make_oracle("ss", epsilon=1.0, domain_size=16),
    "rappor": lambda: make_oracle("rappor", epsilon=1.0, domain_size=8, k=16, m=4, h=2),
    "cms": lambda: make_oracle("cms", epsilon=1.0, domain_size=8, k=4, m=20),
    "she d=5": lambda: make_oracle("she", epsilon=1.0, domain_size=5),
    "the d=4": lambda: make_oracle("the", epsilon=1.0, domain_size=4),
    "hcms": lambda: make_oracle("hcms", epsilon=1.0, domain_size=8, k=4, m=16),
    "olh": lambda: make_oracle("olh", epsilon=1.0, domain_size=8),
    "de": lambda: make_oracle("de", epsilon=1.0, domain_size=8),
    "hr": lambda: make_oracle("hr", epsilon=1.0, domain_size=8),
}

TEXT_CHARS = ["=", "\n", "é", "-", "_", " ", "\x00", "A", "/", "+", "g", "Q", "w"]
FOREIGN = [12, None, b"QUFB", ["A"], True, 1.5, {"bits": "AAAA"}]


class Count(int):
    """An int subclass: the per-report path takes it as its value, the whole batch must too."""


# Around 2^31 and 2^32: batch_decode.int32_values' and wide_values' edges (cohorts, seeds).
INTS = [
    *(True, False, -1, 0, 1, 2**31 - 1, 2**31, -(2**31), 2**32 - 1, 2**32, 2**70, -(2**70)),
    *(1.0, "1", None, [1], Count(1), Count(-1), np.int64(1), np.uint8(1)),
]


def per_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn the whole-batch paths off: every batch takes the per-report path."""
    for module in (unary, histogram):
        monkeypatch.setattr(module, "decode_base64_column", lambda *args: None)
    monkeypatch.setattr(batch_decode, "int_column", lambda *args: None)


def outcome(oracle: FrequencyOracle, reports: Any) -> Any:
    try:
        batch = oracle.decode(reports)
    except ReportError as error:
        return ("error", str(error), error.index)
    return {name: (column.dtype.str, column.tolist()) for name, column in batch.items()}


def valid_reports(oracle: FrequencyOracle, n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    batch = oracle.perturb_batch(rng.integers(0, oracle.domain_size, n), rng)
    return [dict(report) for report in oracle.encode(batch)]


def break_text(text: str, rng: random.Random) -> object:
    choice = rng.randrange(9)
    position = rng.randrange(len(text))
    if choice == 0:
        return text[:position] + rng.choice(TEXT_CHARS) + text[position + 1 :]
    if choice == 1:
        return text[:position] + text[position + 1 :]
    if choice == 2:
        return text[:position] + rng.choice(TEXT_CHARS) + text[position:]
    if choice == 3:
        return text[:-4] if rng.random() < 0.5 else text + "===="
    if choice == 4:  # every last data character: unused bits set, or "=" moved
        data = text.rstrip("=")
        last = rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        return data[:-1] + last + text[len(data) :]
    if choice == 5:
        return ""
    if choice == 6:
        return rng.choice(FOREIGN)
    if choice == 7:

        class Text(str):
            pass

        return Text(text)
    return text.replace("=", "A")


def break_report(report: dict[str, Any], rng: random.Random) -> object:
    choice = rng.randrange(6)
    name = rng.choice(sorted(report))
    if choice == 0:
        return rng.choice([[], "x", None, 5, [report]])
    if choice == 1:
        return {key: value for key, value in report.items() if key != name}
    if choice == 2:
        return OrderedDict(report)
    if choice == 3:
        return {**report, "extra": 1}
    value = report[name]
    if isinstance(value, str):
        return {**report, name: break_text(value, rng)}
    return {**report, name: rng.choice(INTS)}


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_a_batch_decodes_as_report_by_report(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = ORACLES[name]()
    rng = random.Random(name)
    batches: list[Any] = [[], valid_reports(oracle, 1, 1), valid_reports(oracle, 50, 2)]
    for trial in range(300):
        reports: list[Any] = valid_reports(oracle, rng.randrange(1, 8), trial)
        for at in rng.sample(range(len(reports)), min(len(reports), rng.choice([1, 1, 2]))):
            reports[at] = break_report(reports[at], rng)
        batches.append(reports)
    monkeypatch.setattr(batch_decode, "WHOLE_BATCH_MIN", 1)  # small batches take it too
    batched = [outcome(oracle, reports) for reports in batches]
    per_report(monkeypatch)
    expected = [outcome(oracle, reports) for reports in batches]
    assert batched == expected
    rejected = sum(isinstance(result, tuple) for result in expected)
    assert 100 < rejected < len(batches) - 3  # the trials break some batches, not all


@pytest.mark.parametrize(
    "name", ["oue d=5", "oue d=9", "sue d=20", "sue d=30", "oue d=48", "oue d=64"]
)
def test_a_valid_batch_takes_the_whole_batch_path(name: str) -> None:
    """Short texts (batch_decode.short_rows) and the grid alike: a valid batch is decoded
    whole, to the bytes of each text, not sent to the per-report path."""
    oracle = ORACLES[name]()
    reports = valid_reports(oracle, 40, 3)
    size = unary.packed_width(oracle.domain_size)
    rows = batch_decode.decode_base64_column(reports, "bits", size)
    assert rows is not None and rows.flags.c_contiguous
    expected = [list(binascii.a2b_base64(report["bits"])) for report in reports]
    assert rows.dtype == np.uint8 and rows.tolist() == expected


@pytest.mark.parametrize(
    ("limit", "values", "expected"),
    [
        (3, [0, 1, 2], [0, 1, 2]),
        (3, [0, 3], None),
        (2**31, [0, 2**31 - 1], [0, 2**31 - 1]),
        (2**31, [2**31], None),
        (2**31, [-1, 0], None),
        (2**32, [0, 2**32 - 1], [0, 2**32 - 1]),
        (2**32, [2**32], None),
        (2**32, [-1], None),
        # marshal writes a bool in 1 byte and a float in 9: 10 for two, as two ints' 5 each.
        (2**31, [True, 1.5], None),
        (2**32, [True, 1.5], None),
        (3, [Count(1), 2], None),
    ],
)
def test_an_int_column_is_exactly_the_ints_below_the_limit(
    limit: int, values: list[Any], expected: list[int] | None
) -> None:
    reports = [{"y": value} for value in values]
    column = batch_decode.int_column(reports, "y", limit, np.uint32)
    if expected is None:
        assert column is None
    else:
        assert column is not None and column.dtype == np.uint32 and column.tolist() == expected
