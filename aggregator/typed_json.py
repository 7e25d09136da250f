"""Checks of parsed JSON against TypedDicts (aggregator/model.py's window document): every
field at any depth present, of its type, and none the type lacks."""

import functools
import types
import typing
from collections.abc import Callable
from typing import Literal, Union


class DocumentError(ValueError):
    """A stored document that does not match the model; the message names the field."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        #: Where, innermost last (filled in while the check unwinds).
        self.path: list[str] = []

    def __str__(self) -> str:
        return f"document{''.join(reversed(self.path))}: {self.reason}"


Check = Callable[[object], None]


@functools.cache
def checker(expected: object) -> Check:
    """A function raising DocumentError unless its argument (parsed JSON) is of the type
    `expected`; built once per type, since a document repeats Items thousands of times."""
    origin = typing.get_origin(expected)
    if typing.is_typeddict(expected):
        return _object_checker(expected)
    if origin in (Union, types.UnionType):
        return _union_checker(typing.get_args(expected))
    if origin is Literal:
        return _literal_checker(typing.get_args(expected))
    if origin is list:
        return _list_checker(checker(typing.get_args(expected)[0]))
    if origin is dict:
        return _dict_checker(checker(typing.get_args(expected)[1]))
    return _scalar_checker(expected)


def _object_checker(expected: object) -> Check:
    required: frozenset[str] = vars(expected)["__required_keys__"]
    # Filled at the first check, so a type may contain itself (Privacy.levels).
    fields: dict[str, Check] = {}

    def check(value: object) -> None:
        if not fields:
            hints = typing.get_type_hints(expected).items()
            fields.update((key, checker(field)) for key, field in hints)
        if type(value) is not dict:
            raise DocumentError("expected an object")
        if not required <= value.keys():
            raise DocumentError(f"missing field {min(required - value.keys())!r}")
        if not value.keys() <= fields.keys():  # a field the model lacks: it is out of date
            raise DocumentError(f"unknown field {min(value.keys() - fields.keys())!r}")
        for key, check_field in fields.items():
            if key in value:
                try:
                    check_field(value[key])
                except DocumentError as error:
                    error.path.append(f".{key}")
                    raise

    return check


def _union_checker(options: tuple[object, ...]) -> Check:
    checks = [checker(option) for option in options]
    names = " or ".join(getattr(option, "__name__", str(option)) for option in options)

    def check(value: object) -> None:
        for option in checks:
            try:
                option(value)
            except DocumentError:
                continue
            return
        raise DocumentError(f"expected {names}, got {value!r:.60}")

    return check


def _literal_checker(allowed: tuple[object, ...]) -> Check:
    def check(value: object) -> None:
        if value not in allowed:
            raise DocumentError(f"expected one of {allowed}, got {value!r:.60}")

    return check


def _list_checker(element: Check) -> Check:
    def check(value: object) -> None:
        if type(value) is not list:
            raise DocumentError("expected a list")
        for index, entry in enumerate(value):
            try:
                element(entry)
            except DocumentError as error:
                error.path.append(f"[{index}]")
                raise

    return check


def _dict_checker(element: Check) -> Check:
    def check(value: object) -> None:
        if type(value) is not dict:
            raise DocumentError("expected an object")
        for key, entry in value.items():
            try:
                element(entry)
            except DocumentError as error:
                error.path.append(f".{key}")
                raise

    return check


def _scalar_checker(expected: object) -> Check:
    """JSON scalars: a float field accepts an integer (other writers may drop the ".0");
    bool (a subclass of int) is never taken for a number."""
    if not isinstance(expected, type):
        raise TypeError(f"no JSON check for {expected!r}")  # a type this module lacks
    accepted: tuple[type, ...] = (float, int) if expected is float else (expected,)
    name = expected.__name__

    def check(value: object) -> None:
        if type(value) not in accepted:
            raise DocumentError(f"expected {name}, got {value!r:.60}")

    return check
