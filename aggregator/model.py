"""The report model: the types of a window document, from the estimates to the JSON the
aggregator stores, the collector serves unchanged and the CLI and HTML pages read
(docs/aggregator.md, "The report document", describes every field).

TypedDicts, not dataclasses: a document is JSON, and these types are that JSON's schema, so
the stored bytes, the HTTP API and `ldptel report --json` stay one format that mypy checks
end to end. `from_json` checks a document against these types (field by field, at any
depth) before anything reads it; `to_json` writes it.

Optional fields are keys of a `total=False` subclass (not NotRequired): that works on every
Python ldptel supports and keeps `__required_keys__` exact for `from_json`.
"""

import functools
import json
import types
import typing
from typing import Literal, TypedDict, Union

Status = Literal["ok", "not_enough_reports"]


class Window(TypedDict):
    """A time window: [start, end) in UTC."""

    start: str
    end: str
    start_unix: int
    seconds: int


class Significance(TypedDict):
    """How "significantly above zero" was decided (one-sided, Bonferroni over the domain)."""

    z: float
    expected_false_flags: float
    rule: str
    method: str


class Central(TypedDict):
    """The central (epsilon, delta) from amplification by shuffling (aggregator/privacy.py);
    when `applies` is false, `epsilon` is the local one, `delta` 0 and `reason` says why."""

    bound: str
    local_epsilon: float
    n_users: int
    delta: float
    applies: bool
    epsilon: float
    reason: str


class RapporPrivacy(TypedDict):
    """RAPPOR's parameters as used (Rappor.privacy_summary)."""

    epsilon: float
    permanent_epsilon: float
    k: float
    h: float
    m: float
    f: float
    p: float
    q: float


class _Privacy(TypedDict):
    local_epsilon: float
    reports_per_window: int
    user_epsilon_per_window: float
    lifetime_epsilon: float | None
    central: Central | None


class Privacy(_Privacy, total=False):
    """A report's privacy guarantee in numbers."""

    #: RAPPOR only: its parameters and the bound over all reports of one value.
    rappor: RapporPrivacy
    permanent_epsilon: float
    #: A combined report: each level's own privacy section.
    levels: dict[str, "Privacy"]


class LevelRow(TypedDict):
    """One privacy level of a combined report."""

    level: str
    epsilon: float
    #: None: the level does not report (threshold strategy).
    epsilon_used: float | None
    n: int
    #: Its weight in the combined estimate (mean over items; 0 without reports).
    weight: float


class Combined(TypedDict):
    """How a config's privacy levels were combined."""

    strategy: str
    threshold: float | None
    method: str
    assumption: str
    levels: list[LevelRow]


class _Item(TypedDict):
    item: str
    index: int
    estimate: float
    variance: float
    stderr: float
    ci_low: float
    ci_high: float
    consistent: float
    threshold: float
    significant: bool


class Item(_Item, total=False):
    """One item of the domain: its estimated count with variance, stderr, CI, consistent
    estimate and significance."""

    #: Simulated data only (`ldptel demo`): the true count, drawn beside the estimate.
    true_count: int


class _Report(TypedDict):
    campaign: str
    config_id: str
    level: str
    oracle: str
    epsilon: float
    n: int
    window: Window
    built_at: str
    status: Status
    message: str
    min_reports: int
    confidence: float
    consistency: str
    significance: Significance
    privacy: Privacy
    items: list[Item]


class Report(_Report, total=False):
    """The estimates of one (config, privacy level) in one window."""

    #: A config with privacy levels: the report combining them (level "").
    combined: Combined


class WindowDocument(TypedDict):
    """Every report of one campaign window: what keys.report stores."""

    campaign: str
    window: Window
    built_at: str
    reports: list[Report]


class DocumentError(ValueError):
    """A stored document that does not match the model; the message names the field."""


def to_json(document: WindowDocument, indent: int | None = None) -> str:
    """The document as JSON: compact for storage, indented for people."""
    separators = (",", ":") if indent is None else None
    return json.dumps(document, indent=indent, separators=separators)


def from_json(raw: str | bytes) -> WindowDocument:
    """A window document from JSON, checked against the model."""
    value = json.loads(raw)
    _check(WindowDocument, value, "document")
    document: WindowDocument = value
    return document


def _check(expected: object, value: object, where: str) -> None:
    """Raise DocumentError unless `value` (parsed JSON) is of the type `expected`."""
    origin = typing.get_origin(expected)
    if typing.is_typeddict(expected):
        _check_fields(expected, value, where)
    elif origin in (Union, types.UnionType):
        if not any(_matches(option, value) for option in typing.get_args(expected)):
            raise DocumentError(f"{where}: expected {_name(expected)}, got {value!r:.60}")
    elif origin is Literal:
        if value not in typing.get_args(expected):
            raise DocumentError(f"{where}: expected one of {typing.get_args(expected)}")
    elif origin is list:
        if not isinstance(value, list):
            raise DocumentError(f"{where}: expected a list")
        (element,) = typing.get_args(expected)
        for index, entry in enumerate(value):
            _check(element, entry, f"{where}[{index}]")
    elif origin is dict:
        if not isinstance(value, dict):
            raise DocumentError(f"{where}: expected an object")
        _, element = typing.get_args(expected)
        for key, entry in value.items():
            _check(element, entry, f"{where}.{key}")
    elif not _scalar(expected, value):
        raise DocumentError(f"{where}: expected {_name(expected)}, got {value!r:.60}")


def _check_fields(expected: object, value: object, where: str) -> None:
    if not isinstance(value, dict):
        raise DocumentError(f"{where}: expected an object")
    required, fields = _fields(expected)
    missing = sorted(required - value.keys())
    if missing:
        raise DocumentError(f"{where}: missing field {missing[0]!r}")
    for key, field in fields:
        if key in value:
            _check(field, value[key], f"{where}.{key}")


@functools.cache
def _fields(expected: object) -> tuple[frozenset[str], tuple[tuple[str, object], ...]]:
    """A TypedDict's required keys and (key, type) pairs (resolved once: items repeat)."""
    required: frozenset[str] = vars(expected)["__required_keys__"]
    return required, tuple(typing.get_type_hints(expected).items())


def _matches(expected: object, value: object) -> bool:
    try:
        _check(expected, value, "")
    except DocumentError:
        return False
    return True


def _scalar(expected: object, value: object) -> bool:
    """JSON scalars: a float field accepts an integer (json writes 2.0 as 2.0, but other
    writers may not); bool is never taken for a number."""
    if expected is type(None):
        return value is None
    if isinstance(value, bool):
        return expected is bool
    if expected is float:
        return isinstance(value, int | float)
    return isinstance(expected, type) and isinstance(value, expected)


def _name(expected: object) -> str:
    return getattr(expected, "__name__", str(expected))
