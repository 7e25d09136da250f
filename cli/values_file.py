"""--values-file: one user's value per line, UTF-8 (the simulations of `ldptel simulate`
and `ldptel heavy-hitters` run on the users' own data)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ldptel.analysis.simulation import build_oracle
from ldptel.cli.oracle_options import parse_float, parse_int, parse_params
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import FrequencyOracle, oracle_class


def read_values(path: str) -> list[str]:
    """The file's lines without their line ends (\\n or \\r\\n), one user each; an empty
    line is a user whose value is the empty string."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as error:
        raise ParameterError("values_file", f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ParameterError("values_file", f"is not UTF-8 (byte {error.start})") from None
    lines = text.split("\n")
    if lines[-1] == "":  # the last line's end, not an empty value
        lines.pop()
    if not lines:
        raise ParameterError("values_file", f"{path} holds no values")
    return [line.removesuffix("\r") for line in lines]


def oracle_over_file(
    args: argparse.Namespace,
) -> tuple[FrequencyOracle, list[str], NDArray[np.int64]]:
    """The oracle over the values file's domain, its labels and their true counts."""
    if args.n is not None:
        raise ParameterError("n", "comes from --values-file (one user a line); leave --n out")
    counted = Counter(read_values(args.values_file)).most_common()
    labels = [value for value, _ in counted]
    size = (
        len(labels) if args.domain_size is None else parse_int(args.domain_size, "domain_size", 2)
    )
    if size < len(labels):
        raise ParameterError(
            "domain_size", f"must be >= the file's {len(labels)} distinct values, got {size}"
        )
    taken = set(labels)
    unused = (f"#{i}" for i in range(2 * size + 2) if f"#{i}" not in taken)
    labels += [next(unused) for _ in range(size - len(labels))]
    if len(labels) < 2:
        raise ParameterError("values_file", "needs at least 2 distinct values (or --domain-size)")
    params = parse_params(args.param)
    if oracle_class(args.oracle).takes_labels:
        params.setdefault("labels", labels)
    oracle = build_oracle(
        args.oracle, epsilon=parse_float(args.epsilon, "epsilon"), domain_size=size, params=params
    )
    counts = np.zeros(size, dtype=np.int64)
    counts[: len(counted)] = [count for _, count in counted]
    return oracle, labels, counts
