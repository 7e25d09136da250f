"""The options every oracle-driven subcommand shares (--oracle, --epsilon, --domain-size,
--param, --seed) and their parsing into a validated oracle.

Numbers are parsed here rather than by argparse so that a bad value is one line naming the
option (ParameterError), like every other parameter error.
"""

from __future__ import annotations

import argparse
import inspect
import secrets
from typing import Any

import numpy as np

from ldptel.analysis.simulation import build_oracle
from ldptel.client.errors import ParameterError
from ldptel.client.numeric import (
    NUMERIC_MECHANISMS,
    NumericMechanism,
    make_mechanism,
    numeric_class,
)
from ldptel.client.oracles import ORACLES, FrequencyOracle
from ldptel.client.oracles.base import check_epsilon, check_int


def add_oracle_arguments(
    parser: argparse.ArgumentParser,
    *,
    epsilon_required: bool = True,
    numeric: bool = False,
    domain_required: bool = True,
    oracle_required: bool = True,
) -> None:
    """Add --oracle, --epsilon, --domain-size, --param and --seed to a subcommand; with
    `numeric`, also --range for the numeric mechanisms (then --domain-size is optional, as it
    is without `domain_required`)."""
    names = ", ".join([*ORACLES, *(NUMERIC_MECHANISMS if numeric else ())])
    parser.add_argument(
        "--oracle", required=oracle_required, help=f"oracle name: {names} (or an alias)"
    )
    parser.add_argument(
        "--epsilon", required=epsilon_required, metavar="E", help="privacy budget, > 0"
    )
    parser.add_argument(
        "--domain-size",
        required=domain_required and not numeric,
        metavar="D",
        help="number of items, >= 2" + ("" if domain_required else " (default 64)"),
    )
    if numeric:
        parser.add_argument(
            "--range",
            nargs=2,
            metavar=("LO", "HI"),
            help="a numeric mechanism's range (values are clipped into it)",
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


#: Items of a categorical simulation or audit that names no --domain-size (nor a values file).
DEFAULT_DOMAIN_SIZE = 64


def domain_size_from_args(args: argparse.Namespace) -> int:
    """--domain-size, DEFAULT_DOMAIN_SIZE if not given (a numeric oracle takes --range)."""
    if args.domain_size is None:
        return DEFAULT_DOMAIN_SIZE
    return parse_int(args.domain_size, "domain_size", 2)


def mechanism_from_args(args: argparse.Namespace) -> NumericMechanism:
    """The validated numeric mechanism that --oracle, --epsilon, --range, --param describe."""
    if args.oracle not in NUMERIC_MECHANISMS:
        known = ", ".join(NUMERIC_MECHANISMS)
        raise ParameterError("oracle", f"--range needs a numeric oracle ({known})")
    if args.domain_size is not None:
        raise ParameterError("domain_size", "is for categorical oracles; --range replaces it")
    if args.epsilon is None:
        raise ParameterError("epsilon", "is required")
    low, high = (parse_float(text, "range") for text in args.range)
    params = {"epsilon": parse_float(args.epsilon, "epsilon"), "low": low, "high": high}
    accepted = inspect.signature(numeric_class(args.oracle)).parameters
    for key, value in parse_params(args.param).items():
        if key in params:
            raise ParameterError("param", f"{key} has its own option, not --param")
        if key not in accepted:
            known = ", ".join(k for k in accepted if k not in params)
            raise ParameterError(
                "param", f"oracle {args.oracle!r} has no parameter {key!r} (known: {known or '-'})"
            )
        params[key] = value
    return make_mechanism(args.oracle, **params)


def oracle_from_args(args: argparse.Namespace) -> FrequencyOracle:
    """The validated oracle the options describe (ParameterError names the bad field)."""
    if args.oracle in NUMERIC_MECHANISMS and args.oracle not in ORACLES:
        raise ParameterError("range", f"is required for the numeric oracle {args.oracle!r}")
    epsilon = parse_float(args.epsilon, "epsilon")
    domain_size = domain_size_from_args(args)
    return build_oracle(
        args.oracle, epsilon=epsilon, domain_size=domain_size, params=parse_params(args.param)
    )


def rng_from_args(args: argparse.Namespace) -> tuple[np.random.Generator, int]:
    """The simulation's generator and its seed (a fresh random one unless --seed is given),
    so that any run can be repeated."""
    seed = secrets.randbits(32) if args.seed is None else parse_int(args.seed, "seed", 0)
    return np.random.default_rng(seed), seed
