"""A breakdown campaign's attributes: 2 to 8 named categorical attributes, each with its
labels, and the mixed-radix index of a row (one value per attribute) in their joint domain."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError

MIN_ATTRIBUTES = 2
MAX_ATTRIBUTES = 8
#: The joint domain of a joint-oracle breakdown is the oracles' largest domain (2^24).
MAX_JOINT = 2**24
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class Attributes:
    """Attribute names in campaign order, each with its labels (value index -> label)."""

    names: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]

    @classmethod
    def from_config(cls, attributes: object) -> Attributes:
        """From a config's `"attributes": {"os": ["android", "ios"], ...}` (order kept)."""
        if not isinstance(attributes, Mapping):
            raise ParameterError("attributes", "must be an object of name -> list of labels")
        if not MIN_ATTRIBUTES <= len(attributes) <= MAX_ATTRIBUTES:
            raise ParameterError(
                "attributes", f"must hold {MIN_ATTRIBUTES} to {MAX_ATTRIBUTES} attributes"
            )
        names, labels = [], []
        for name, values in attributes.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise ParameterError("attributes", f"name {name!r} must match {_NAME.pattern}")
            field = f"attributes.{name}"
            if not isinstance(values, list) or len(values) < 2:
                raise ParameterError(field, "must be a list of at least 2 labels")
            if not all(isinstance(v, str) and v for v in values) or len(set(values)) < len(values):
                raise ParameterError(field, "labels must be distinct non-empty strings")
            names.append(name)
            labels.append(tuple(values))
        if math.prod(len(v) for v in labels) > MAX_JOINT:
            raise ParameterError("attributes", f"joint domain must be at most {MAX_JOINT}")
        return cls(tuple(names), tuple(labels))

    @classmethod
    def of_sizes(cls, sizes: Mapping[str, int]) -> Attributes:
        """Attributes with labels "0".."size-1" (simulation)."""
        return cls.from_config({k: [str(i) for i in range(v)] for k, v in sizes.items()})

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.labels)

    @property
    def joint_size(self) -> int:
        return math.prod(self.sizes)

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Every pair of attribute positions (a < b), in lexicographic order."""
        return tuple(itertools.combinations(range(len(self.names)), 2))

    def joint_index(self, rows: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Row-major index of each row (n x k value indices) in the joint domain."""
        # Mixed radix by hand: ravel_multi_index's stubs type a scalar result.
        index = np.zeros(np.asarray(rows).shape[0], dtype=np.int64)
        for column, size in zip(np.asarray(rows, dtype=np.int64).T, self.sizes, strict=True):
            index = index * size + column
        return index

    def row_of(self, values: Mapping[str, object]) -> tuple[int, ...]:
        """A user's row from {"os": "ios", ...}: every attribute present with a known label
        (ParameterError naming the attribute otherwise)."""
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise ParameterError(unknown[0], "is not an attribute of this campaign")
        row = []
        for name, labels in zip(self.names, self.labels, strict=True):
            if name not in values:
                raise ParameterError(name, "is missing")
            value = values[name]
            if value not in labels:
                raise ParameterError(name, f"{value!r} is not one of its labels")
            row.append(labels.index(str(value)))
        return tuple(row)

    def positions(self, names: Sequence[str]) -> tuple[int, ...]:
        return tuple(self.names.index(name) for name in names)
