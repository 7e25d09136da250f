"""`ldptel simulate --attributes NAME:SIZE,...`: n simulated users' rows (or a CSV's, with
--values-file) through a breakdown mechanism (client/multi/), every one-way and two-way
marginal cell beside the truth, with its stderr and 95% interval."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from ldptel.analysis.breakdown import (
    MarginalResult,
    audit_breakdown,
    rows_from_csv,
    simulate_breakdown,
    simulated_rows,
)
from ldptel.cli.oracle_options import parse_float, parse_int, parse_positive, rng_from_args
from ldptel.cli.table import format_table
from ldptel.client.errors import ParameterError
from ldptel.client.multi import (
    BREAKDOWNS,
    Attributes,
    Breakdown,
    Choice,
    choose_breakdown,
    make_consistent,
)

BREAKDOWN_ORACLES = ("auto", *BREAKDOWNS)
CONSISTENCY = (
    "cells' `consistent`: non-negative, summing to n, agreeing on shared attributes "
    "(PriView's consistency step and Norm-Sub); biased, unlike `estimate`"
)


def parse_attributes(text: str) -> Attributes:
    """NAME:SIZE,... (e.g. os:4,plan:3,country:5)."""
    sizes: dict[str, int] = {}
    for part in text.split(","):
        name, _, size = part.partition(":")
        if not size:
            raise ParameterError("attributes", f"{part!r} is not NAME:SIZE")
        sizes[name.strip()] = parse_int(size, f"attributes.{name.strip()}", 2)
    return Attributes.of_sizes(sizes)


def _mechanism(
    args: argparse.Namespace, attributes: Attributes, n: int
) -> tuple[Breakdown, Choice | None]:
    if args.oracle not in BREAKDOWN_ORACLES:
        raise ParameterError("oracle", f"with --attributes: one of {', '.join(BREAKDOWN_ORACLES)}")
    epsilon = parse_positive(args.epsilon, "epsilon")
    if args.oracle == "auto":
        mechanism, choice = choose_breakdown(epsilon, attributes, n)
        return mechanism, choice
    return BREAKDOWNS[args.oracle](epsilon=epsilon, attributes=attributes), None


def run_breakdown(args: argparse.Namespace) -> int:
    if args.epsilon is None:
        raise ParameterError("epsilon", "is required")
    rng, seed = rng_from_args(args)
    if args.values_file is not None:
        if args.n is not None:
            raise ParameterError("n", "comes from --values-file (one user a row); leave --n out")
        names = [part.partition(":")[0].strip() for part in args.attributes.split(",")]
        attributes, rows = rows_from_csv(args.values_file, names)
    else:
        if args.n is None:
            raise ParameterError("n", "is required")
        attributes = parse_attributes(args.attributes)
        exponent = parse_float(args.zipf_exponent, "zipf_exponent")
        rows = simulated_rows(attributes, parse_int(args.n, "n", 1), rng, exponent)
    mechanism, choice = _mechanism(args, attributes, rows.shape[0])
    results = simulate_breakdown(mechanism, rows, rng)
    document: dict[str, Any] = {
        "oracle": mechanism.name,
        "inner_oracles": list(mechanism.inner_names),
        "epsilon": mechanism.epsilon,
        "audited_epsilon": audit_breakdown(mechanism),
        "attributes": dict(zip(attributes.names, attributes.sizes, strict=True)),
        "n": int(rows.shape[0]),
        "seed": seed,
        "marginals": [_marginal(result, attributes) for result in results],
    }
    consistent = make_consistent([result.marginal for result in results])
    for marginal, counts in zip(document["marginals"], consistent.counts, strict=True):
        for cell, count in zip(marginal["cells"], counts.tolist(), strict=True):
            cell["consistent"] = count
    document["consistency"] = {
        "biased": True,
        "method": CONSISTENCY,
        "rounds": consistent.rounds,
        "disagreement": consistent.disagreement,
    }
    if args.values_file is not None:
        document["values_file"] = args.values_file
    if choice is not None:
        document["requested_oracle"] = "auto"
        document["oracle_choice"] = {"reason": choice.reason, "variances": choice.variances}
    if args.json:
        print(json.dumps(document))
    else:
        print(_text(document, parse_int(args.top, "top", 1)))
    return 0


def _marginal(result: MarginalResult, attributes: Attributes) -> dict[str, Any]:
    marginal = result.marginal
    positions = attributes.positions(marginal.attributes)
    values = np.unravel_index(np.arange(marginal.estimate.size), marginal.shape)
    low, high = marginal.ci95
    cells = [
        {
            "values": [
                attributes.labels[a][int(v[i])] for a, v in zip(positions, values, strict=True)
            ],
            "true": int(result.true[i]),
            "estimate": float(marginal.estimate[i]),
            "stderr": float(marginal.stderr[i]),
            "ci95": [float(low[i]), float(high[i])],
        }
        for i in range(marginal.estimate.size)
    ]
    return {"attributes": list(marginal.attributes), "cells": cells}


def _text(document: dict[str, Any], top: int) -> str:
    lines = [
        f"{document['oracle']} ({'/'.join(document['inner_oracles'])}) epsilon "
        f"{document['epsilon']:g} over {document['n']} users"
    ]
    if "oracle_choice" in document:
        lines.append(f"auto: {document['oracle_choice']['reason']}")
    for marginal in document["marginals"]:
        lines.append("")
        lines.append(" x ".join(marginal["attributes"]))
        rows = [
            [" / ".join(c["values"]), str(c["true"]), f"{c['estimate']:.0f}", f"{c['stderr']:.0f}"]
            for c in sorted(marginal["cells"], key=lambda c: -c["true"])[:top]
        ]
        lines.append(format_table(["cell", "true", "estimate", "stderr"], rows))
    return "\n".join(lines)
