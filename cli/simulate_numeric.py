"""`ldptel simulate --range LO HI`: n simulated clients through a numeric mechanism's real
code (values from --values-file, one number per line, or a synthetic --distribution), the
mean with its exact standard error, and for sw / dbitflip the estimated distribution; with
--target-stderr, the users needed for the mean's worst-case standard error."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldptel.analysis.numeric import (
    NUMERIC_DISTRIBUTIONS,
    NumericSimulation,
    read_values,
    simulate_numeric,
    synthetic_values,
)
from ldptel.cli.oracle_options import (
    mechanism_from_args,
    parse_int,
    parse_positive,
    rng_from_args,
)
from ldptel.cli.progress import ProgressLine
from ldptel.cli.table import format_table
from ldptel.client.errors import ParameterError
from ldptel.client.numeric import NumericMechanism

#: The quantiles reported beside a distribution estimate.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
#: A 95% interval: estimate +- 1.96 stderr.
Z95 = 1.959963984540054


def run_numeric(args: argparse.Namespace) -> int:
    mechanism = mechanism_from_args(args)
    if args.target_stderr is not None:
        return _plan(mechanism, args)
    rng, seed = rng_from_args(args)
    values, source = _values(args, mechanism, rng)
    with ProgressLine(sys.stderr, f"simulating {mechanism.name}") as progress:
        result = simulate_numeric(mechanism, values, rng, progress.update)
    document = {**_header(mechanism, args, seed, values.size, source), **_estimates(result)}
    if args.json:
        print(json.dumps(document))
    else:
        print(_text(document))
    return 0


def _values(
    args: argparse.Namespace, mechanism: NumericMechanism, rng: np.random.Generator
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], dict[str, Any]]:
    """The simulated clients' values and where they came from."""
    if args.values_file is not None:
        if args.n is not None:
            raise ParameterError("n", "comes from --values-file (one value per line)")
        path = Path(args.values_file)
        try:
            lines = path.read_text().splitlines()
        except OSError as error:
            raise ParameterError("values_file", f"cannot read {path}: {error.strerror}") from None
        return read_values(lines), {"values_file": str(path), "distribution": None}
    if args.n is None:
        raise ParameterError("n", "is required (or --values-file, or --target-stderr to plan)")
    shape = args.distribution or NUMERIC_DISTRIBUTIONS[0]
    if shape not in NUMERIC_DISTRIBUTIONS:
        known = ", ".join(NUMERIC_DISTRIBUTIONS)
        raise ParameterError("distribution", f"must be one of {known} with --range")
    n = parse_int(args.n, "n", 1)
    values = synthetic_values(shape, n, mechanism.low, mechanism.high, rng)
    return values, {"values_file": None, "distribution": shape}


def epsilon_words(exact: float, requested: float) -> str:
    """The epsilon a run guarantees, in words: the requested one when they agree to 10
    digits, else the exact loss of the mechanism's integer probabilities (never above the
    request: duchi's A = ceil(B K / (e^eps - 1)) gives ln(1 + B K / A) = 0.9999999987 for 1)
    beside the request."""
    if f"{exact:.10g}" == f"{requested:.10g}":
        return f"epsilon {requested:g}"
    return (
        f"epsilon {exact:.10g} (requested {requested:g}; the exact loss of its integer "
        "probabilities, never above the request)"
    )


def _header(
    mechanism: NumericMechanism,
    args: argparse.Namespace,
    seed: int,
    n: int,
    source: dict[str, Any],
) -> dict[str, Any]:
    header: dict[str, Any] = {
        "oracle": mechanism.name,
        "epsilon": mechanism.epsilon,
        "requested_epsilon": mechanism.requested_epsilon,
        "range": [mechanism.low, mechanism.high],
        "params": {**mechanism.fixed_params(), **mechanism.derived_params()},
        "n": n,
        **source,
        "seed": seed,
    }
    if mechanism.name != args.oracle:
        header["requested_oracle"] = args.oracle
    choice = getattr(mechanism, "auto_choice", None)
    if choice is not None:
        header["oracle_choice"] = choice.to_dict()
    return header


def _estimates(result: NumericSimulation) -> dict[str, Any]:
    """The mean (true, estimate, exact stderr, the reports' own stderr, its 95% interval)
    and, for distribution mechanisms, the histogram over the levels with CDF and quantiles."""
    mean = {
        "true": result.true_mean,
        "estimate": result.estimate,
        "stderr": result.stderr,
        "estimated_stderr": result.estimated_stderr,
        "worst_case_stderr": result.worst_stderr,
        "ci95": [
            result.estimate - Z95 * result.estimated_stderr,
            result.estimate + Z95 * result.estimated_stderr,
        ],
    }
    document: dict[str, Any] = {"mean": mean}
    estimate, truth = result.distribution, result.true_probabilities
    if estimate is not None and truth is not None:
        document["histogram"] = {
            "points": estimate.points.tolist(),
            "edges": estimate.edges.tolist(),
            "probabilities": estimate.probabilities.tolist(),
            "raw": estimate.raw.tolist(),
            "cdf": estimate.cdf.tolist(),
            "true_probabilities": truth.tolist(),
            "quantiles": {f"{q:g}": estimate.quantile(q) for q in QUANTILES},
            "wasserstein": result.wasserstein,
        }
    return document


def _text(document: dict[str, Any]) -> str:
    mean = document["mean"]
    low, high = document["range"]
    source = document["values_file"] or document["distribution"]
    lines = [
        f"oracle {document['oracle']}, "
        f"{epsilon_words(document['epsilon'], document['requested_epsilon'])}, range "
        f"[{low:g}, {high:g}], n {document['n']} ({source}, seed {document['seed']})"
    ]
    if "oracle_choice" in document:
        lines.append(
            f"{document['requested_oracle']} chose {document['oracle']}: "
            f"{document['oracle_choice']['reason']}"
        )
    z = (mean["estimate"] - mean["true"]) / mean["stderr"]
    lines += [
        "",
        format_table(
            ["", "true", "estimate", "stderr", "95% interval", "error/stderr"],
            [
                [
                    "mean",
                    f"{mean['true']:.6g}",
                    f"{mean['estimate']:.6g}",
                    f"{mean['stderr']:.4g}",
                    f"[{mean['ci95'][0]:.6g}, {mean['ci95'][1]:.6g}]",
                    f"{z:+.2f}",
                ]
            ],
        ),
    ]
    histogram = document.get("histogram")
    if histogram is not None:
        quantiles = ", ".join(f"q{q}: {v:.4g}" for q, v in histogram["quantiles"].items())
        lines += [
            "",
            f"distribution over {len(histogram['points'])} levels (--json for the histogram "
            f"and CDF): {quantiles}; Wasserstein distance to the truth "
            f"{histogram['wasserstein']:.4g}",
        ]
    return "\n".join(lines)


def _plan(mechanism: NumericMechanism, args: argparse.Namespace) -> int:
    """Users needed so the mean's worst-case standard error is <= the target."""
    target = parse_positive(args.target_stderr, "target_stderr")
    worst = mechanism.worst_report_variance()
    users = max(1, math.ceil(worst / target**2))
    document = {
        "oracle": mechanism.name,
        "epsilon": mechanism.epsilon,
        "requested_epsilon": mechanism.requested_epsilon,
        "range": [mechanism.low, mechanism.high],
        "target_stderr": target,
        "n_required": users,
        "variance_per_report": worst,
    }
    if args.json:
        print(json.dumps(document))
    else:
        print(
            f"oracle {mechanism.name}, "
            f"{epsilon_words(mechanism.epsilon, mechanism.requested_epsilon)}, range "
            f"[{mechanism.low:g}, {mechanism.high:g}]: {users:,} users for a standard error "
            f"<= {target:g} on the mean (worst case over values)"
        )
    return 0
