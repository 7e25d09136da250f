"""The options every oracle-driven subcommand shares (--oracle, --epsilon, --domain-size,
--param, --seed) and their parsing into a validated oracle.

Numbers are parsed here rather than by argparse so that a bad value is one line naming the
option (ParameterError), like every other parameter error.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

import numpy as np

from ldptel.analysis.simulation import build_oracle
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import ORACLES, FrequencyOracle
from ldptel.client.oracles.base import check_epsilon, check_int


def add_oracle_arguments(
    parser: argparse.ArgumentParser, *, epsilon_required: bool = True, domain_required: bool = True
) -> None:
    """Add --oracle, --epsilon, --domain-size, --param and --seed to a subcommand."""
    parser.add_argument(
        "--oracle", required=True, help=f"oracle name: {', '.join(ORACLES)} (or an alias)"
    )
    parser.add_argument(
        "--epsilon", required=epsilon_required, metavar="E", help="privacy budget, > 0"
    )
    parser.add_argument(
        "--domain-size", required=domain_required, metavar="D", help="number of items, >= 2"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an oracle parameter, e.g. --param g=5 (repeatable)",
    )
    parser.add_argument(
        "--seed", metavar="S", help="seed of the simulation's random generator (default: random)"
    )


def parse_float(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParameterError(name, f"must be a number, got {text!r}") from None


def parse_int(text: str, name: str, minimum: int, maximum: int | None = None) -> int:
    """An integer option; also accepts 1_000_000 and 1e6."""
    try:
        value = int(text)
    except ValueError:
        number = parse_float(text, name)
        if not number.is_integer():
            raise ParameterError(name, f"must be an integer, got {text!r}") from None
        value = int(number)
    return check_int(value, name, minimum, maximum)


def parse_positive(text: str, name: str) -> float:
    """A finite number > 0."""
    return check_epsilon(parse_float(text, name), name)


def parse_param_value(text: str) -> int | float | str:
    """An oracle parameter's value: an int if it reads as one, else a float, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_params(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE strings -> {KEY: parsed VALUE}; keys must be identifiers and distinct."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier() or not value.strip():
            raise ParameterError("param", f"expected KEY=VALUE, got {item!r}")
        if key in params:
            raise ParameterError("param", f"{key} given twice")
        params[key] = parse_param_value(value.strip())
    return params


def oracle_from_args(args: argparse.Namespace) -> FrequencyOracle:
    """The validated oracle the options describe (ParameterError names the bad field)."""
    epsilon = parse_float(args.epsilon, "epsilon")
    domain_size = parse_int(args.domain_size, "domain_size", 2)
    return build_oracle(
        args.oracle, epsilon=epsilon, domain_size=domain_size, params=parse_params(args.param)
    )


def rng_from_args(args: argparse.Namespace) -> tuple[np.random.Generator, int]:
    """The simulation's generator and its seed (a fresh random one unless --seed is given),
    so that any run can be repeated."""
    seed = secrets.randbits(32) if args.seed is None else parse_int(args.seed, "seed", 0)
    return np.random.default_rng(seed), seed
